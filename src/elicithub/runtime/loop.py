"""The agent run loop: model turns and tool calls, every step on the conversation's log, every call checkpointed."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

from elicithub import logfields, telemetry
from elicithub.core.broker import Broker
from elicithub.core.elicitation import new_id
from elicithub.core.events import (
    ModelSaid,
    ModelStatus,
    RunFinished,
    RunStarted,
    StepStarted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolStatus,
)
from elicithub.core.ports import ConversationStore, RunStore
from elicithub.core.runs import ConversationRecord, Message, Pause, RunRecord, ToolCall, conversation_key, next_status
from elicithub.runtime.asker import Asker, Emit
from elicithub.runtime.checkpoint import Checkpoint, Saves
from elicithub.runtime.histories import Histories
from elicithub.runtime.models import Model, ModelFailed, ModelRequest, ModelTurn, ToolSpec
from elicithub.runtime.models.context import estimate_tokens, fit
from elicithub.runtime.parking import Spot
from elicithub.runtime.stream import RunStream
from elicithub.runtime.tools import CallContext, Progress, RunChild, ToolOutcome, Tools, stopped_call

log = logging.getLogger(__name__)

MAX_STEPS = 8
CLIENT_TOOL = "client_tool"
"""How a run ends that hands calls of its client's tools over to the client (`RunRecord.client_tools`)."""


@dataclass(frozen=True)
class AgentSetup:
    """What an agent runs with: its model (None: the runner's default), its instructions, its turns per run."""

    model: Model | None = None
    instructions: str | None = None
    max_steps: int = MAX_STEPS


@dataclass(frozen=True)
class Showing:
    """Where a run's questions show: on the stream of `run_id` (its own, or for a delegated run the one the
    person follows), through `emit`, asked by the agents of `agent_path` (outermost first). `active` says whether
    `run_id` is still its conversation's run: a new message supersedes it, and the runs it delegated to with it.
    `parking`: where the run may park, letting go of its task while its questions wait (runtime/parking.py)."""

    run_id: str
    emit: Emit
    agent_path: tuple[str, ...]
    active: Callable[[], Awaitable[bool]]
    run_child: RunChild
    parking: Spot | None = None

    def context(
        self, record: RunRecord, asker: Asker | None, progress: Progress | None = None, call_id: str | None = None
    ) -> CallContext:
        """A call's context: the run's person, its questions shown here."""
        return CallContext(
            record.conversation_id,
            self.run_id,
            record.user_id,
            record.supports_elicitation,
            asker,
            self.agent_path,
            record.run_id,
            record.surface,
            frozenset(record.modes),
            progress,
            call_id,
            self.run_child,
        )


class Runner:
    def __init__(
        self,
        model: Model,
        tools: Tools,
        broker: Broker,
        stream: RunStream,
        runs: RunStore,
        conversations: ConversationStore,
        agents: Mapping[str, AgentSetup] | None = None,
        release: Callable[[RunRecord], Awaitable[None]] | None = None,
    ) -> None:
        """`release(record)`: a run that held places under the limits (`limited_as`) finished, and lets them go."""
        self.model = model
        self.release = release
        """The default model: an agent without one of its own runs on it."""
        self.agents = dict(agents or {})
        self.tools = tools
        self.broker = broker
        self.stream = stream
        self.runs = runs
        self.conversations = conversations
        self.histories = Histories()  # the conversations' messages as this hub last wrote them

    async def run(
        self,
        record: RunRecord,
        *,
        resumed: bool = False,
        parking: Spot | None = None,
        unparked: bool = False,
        saves: Saves | None = None,
    ) -> None:
        """Run until the model answers without tool calls, then commit the conversation and end the stream.

        A new run has been `start`ed (`saves`: what that gave); a `resumed` one first finishes the tool calls its
        record says were interrupted. A cancelled run (shutdown) writes nothing more: it stays on record for a hub to
        continue; so does a run that parks at its `parking` (raising Parked), resumed `unparked`, its stream going on
        as if it had waited.
        """
        key = conversation_key(record.user_id, record.conversation_id)

        async def emit(event: StreamEvent) -> None:
            await self.stream.emit(key, record.run_id, event)

        saves = saves or Saves(self.runs)
        active = partial(self._active, key, record.run_id)
        showing = Showing(record.run_id, emit, (record.agent,), active, self.run_child, parking)
        with (
            logfields.about(run_id=record.run_id, conversation_id=record.conversation_id),
            telemetry.run(record, resumed) as span,
        ):
            record, messages, reason = await self._steps(record, saves, emit, showing, resumed, unparked)
            span.note("outcome", reason, failed=reason == "error")
        await self._finish(key, record, messages, saves, partial(emit, RunFinished(reason)))

    def start(self, record: RunRecord) -> Saves:
        """A new run begins, before its task does: RunStarted is posted (so a reader that follows at once finds a
        write on its way to wait for) and its first save goes on while the run starts (the run's saves then)."""
        self.stream.post(
            conversation_key(record.user_id, record.conversation_id), record.run_id, RunStarted(record.run_id)
        )
        return Saves(self.runs, record)

    async def run_child(self, record: RunRecord, parent: CallContext, resumed: bool = False) -> ToolOutcome:
        """A delegated run, inside the parent's tool call: its questions show on the parent's stream (with the
        agent path), its own steps on its own run; its last words are the call's result."""
        key = conversation_key(record.user_id, record.conversation_id)

        async def emit(event: StreamEvent) -> None:
            await self.stream.emit(key, record.run_id, event)

        async def show(event: StreamEvent) -> None:
            await self.stream.emit(key, parent.run_id, event)

        active = partial(self._active, key, parent.run_id)
        showing = Showing(parent.run_id, show, (*parent.agent_path, record.agent), active, self.run_child)
        with (
            logfields.about(run_id=record.run_id, conversation_id=record.conversation_id),
            telemetry.run(record, resumed) as span,
        ):
            if not resumed:
                await emit(RunStarted(record.run_id))
            record, messages, reason = await self._steps(record, Saves(self.runs), emit, showing, resumed)
            span.note("outcome", reason, failed=reason == "error")
        finished = next_status(record.status, "finish")
        await self.runs.save(record.with_(messages=messages, tool_calls=[], pause=None, status=finished))
        await emit(RunFinished(reason))
        if reason == "superseded" and parent.asker is not None:
            parent.asker.stopped = True  # the run the person follows was stopped: the parent's calls end too
        return ToolOutcome(last_words(messages), is_error=reason == "error")

    async def _steps(
        self, record: RunRecord, saves: Saves, emit: Emit, showing: Showing, resumed: bool, unparked: bool = False
    ) -> tuple[RunRecord, list[Message], str]:
        messages = list(record.messages)
        reason = "stop"
        ended: str | None = None
        setup = self.agents.get(record.agent, AgentSetup())
        model = setup.model or self.model
        instructions = "\n\n".join(i for i in (setup.instructions, record.instructions) if i) or None
        offered = [ToolSpec(t["name"], t["description"], t["parameters"]) for t in record.client_tools]
        try:
            if (resumed or record.direct) and record.tool_calls:
                start = record.call_index
                calls = record.tool_calls
                record, ended = await self._calls(record, saves, messages, calls, start, emit, showing, unparked)
            for _ in range(0 if record.direct else setup.max_steps):
                if ended is not None:  # stopped while a call waited, or its client makes the rest
                    reason = ended
                    break
                # Listed before each turn: a call may have connected a server whose tools were unknown.
                specs = [*await self._list_tools(record, showing), *offered]
                request = ModelRequest(fitted(model, messages, instructions, specs), specs, instructions)
                turn, cut = await self._turn(record, model, replace(request, agent=record.agent), emit)
                if cut or not turn.tool_calls:
                    messages.append(_assistant(turn))
                    reason = "superseded" if cut else reason
                    break
                if not await showing.active():
                    reason = "superseded"  # the person moved on: make no more calls for this run
                    break
                messages.append(_assistant(turn))
                record, ended = await self._calls(record, saves, messages, turn.tool_calls, 0, emit, showing)
                if ended is not None:
                    reason = ended
                    break
            else:
                if record.direct:
                    reason = ended or reason  # its one call made: no model turn follows
                else:
                    await emit(TextDelta("Stopped: the model kept calling tools."))
        except asyncio.CancelledError:
            raise
        except ModelFailed as exc:
            log.warning("run %s: %s", record.run_id, exc)
            await emit(TextDelta(str(exc)))
            reason = "error"
        except Exception as exc:
            log.exception("run %s failed", record.run_id)
            await emit(TextDelta(f"The run failed: {exc}"))
            reason = "error"
        return record, messages, reason

    async def _turn(self, record: RunRecord, model: Model, request: ModelRequest, emit: Emit) -> tuple[ModelTurn, bool]:
        """One model turn, streamed: its start goes on the log first, its pieces to readers as they come
        (runtime/live.py), what it said on the log once it ends. Whether a stop cut it short (the text so far is
        what it said)."""
        key = conversation_key(record.user_id, record.conversation_id)
        turn_id = new_id("turn")
        live = self.stream.live.begin(key, record.run_id, turn_id)
        started = asyncio.ensure_future(self.stream.append(key, record.run_id, StepStarted(turn_id)))
        started.add_done_callback(lambda _: live.open())

        async def status(text: str) -> None:
            await emit(ModelStatus(text))

        task = live.task = asyncio.ensure_future(model.turn(request, live, status))
        if live.stopped:
            live.stop()
        cut = False
        try:
            await started
            turn = await task
        except asyncio.CancelledError:
            outer = asyncio.current_task()
            if not (live.stopped and task.cancelled()) or (outer is not None and outer.cancelling()):
                task.cancel()
                self.stream.live.drop(live)  # the run stays on record: a hub asks its model again
                raise
            turn, cut = ModelTurn(text=live.text or None, reasoning=live.reasoning), True
        except BaseException:
            # The model failed after some of its turn streamed: what it said stays on the log, before the error.
            await emit(ModelSaid(turn_id, live.text, live.reasoning))
            await live.end()
            raise
        await emit(ModelSaid(turn_id, turn.text or "", turn.reasoning, turn.usage))
        await live.end()
        return turn, cut

    async def _list_tools(self, record: RunRecord, showing: Showing) -> list[ToolSpec]:
        """The tools the model may call now. Listing never asks anything: a server whose tools need the person's
        sign-in offers `SERVER.connect`, and only a call to it asks."""
        return await self.tools.list_tools(showing.context(record, None))

    async def _calls(
        self,
        record: RunRecord,
        saves: Saves,
        messages: list[Message],
        calls: list[ToolCall],
        start: int,
        emit: Emit,
        showing: Showing,
        shown: bool = False,
    ) -> tuple[RunRecord, str | None]:
        """Make the tool calls from `start` on, each checkpointed, so a completed call is never made again; `shown`:
        the stream shows call `start` already (an unparked run goes on with it). How the run ends with them, if it
        does: `superseded` (stopped while a call waited: the calls end with that one), or `client_tool` (some are
        its client's to make: they are shown after the hub's own are made, and the run hands them over)."""
        resume = record.pause if record.call_index == start else None
        checkpoint = Checkpoint(saves, record)
        for index in range(start, len(calls)):
            call = calls[index]
            if _client_makes(record, call):
                continue
            checkpoint.start(messages, calls, index)
            asker = self._asker(showing, checkpoint, resume if index == start else None)
            await saves.landed()  # no call for a run that is not on record
            if not (shown and index == start):
                await emit(call)
            if index == start and resume is not None and resume.state.get("kind") == "rerun":
                # The call runs again from its start: first let the questions it asked before be answered,
                # so they show at once; asked again, they get those answers.
                await asker.answers(resume, resumable=True)
            if asker.stopped:  # while it waited to run again: it is not made again
                outcome = ToolOutcome(stopped_call(call.name), is_error=True)
            elif call.error is not None:
                outcome = ToolOutcome(call.error, is_error=True)  # the model is told why, and may call again
            else:
                context = showing.context(record, asker, partial(_progress, emit, call.call_id), call.call_id)
                with telemetry.tool_call(call.name) as span:
                    outcome = await self.tools.call(call.name, call.arguments, context)
                    span.note("is_error", outcome.is_error, failed=outcome.is_error)
            # A direct call's result goes on the log as given, for its caller; an agent's model reads the text.
            result = outcome.result if record.direct else None
            await emit(ToolCallFinished(call.call_id, call.name, outcome.text, outcome.is_error, result))
            messages.append(
                {"role": "tool", "tool_call_id": call.call_id, "content": outcome.text, "is_error": outcome.is_error}
            )
            await checkpoint.done(messages)
            if asker.stopped:
                return checkpoint.record, "superseded"
        handed = [call for call in calls if _client_makes(record, call)]
        for call in handed:
            await emit(call)
        return checkpoint.record, CLIENT_TOOL if handed else None

    def _asker(self, showing: Showing, checkpoint: Checkpoint, resume: Pause | None) -> Asker:
        return Asker(
            self.broker,
            save=checkpoint.pause,
            checked=partial(self._paused, checkpoint, showing) if self.conversations.ordered else None,
            emit=showing.emit,
            resume=resume,
            agent_path=showing.agent_path,
            active=showing.active,
            parking=showing.parking,
        )

    @staticmethod
    async def _paused(checkpoint: Checkpoint, showing: Showing, pause: Pause) -> bool:
        """Save the pause, then read whether the run is still active, issued in the same turn as the pause and the
        questions stored with it (broker.open), after them: a store that applies what one turn issues in that order
        (`ConversationStore.ordered`) sends them in one write, and the read sees them stored."""
        saved = asyncio.ensure_future(checkpoint.pause(pause))
        await asyncio.sleep(0)  # the pause's and the questions' writes are issued first
        try:
            active = await showing.active()
        finally:
            await saved
        return active

    async def _active(self, key: str, run_id: str) -> bool:
        conversation = await self.conversations.get(key, messages=False)
        return conversation is not None and conversation.active_run_id == run_id

    async def _finish(
        self, key: str, record: RunRecord, messages: list[Message], saves: Saves, end: Callable[[], Awaitable[None]]
    ) -> None:
        """Mark the run finished and commit what it said to its conversation, unless a newer message superseded it,
        in one step (`RunStore.finish`), and `end` its stream."""
        await saves.landed()
        finished = record.with_(
            messages=messages, tool_calls=[], pause=None, status=next_status(record.status, "finish")
        )
        if record.limited_as and self.release is not None:
            # Let go before its end shows, so that a reader who sees it end may start another at once.
            version, _ = await asyncio.gather(self.runs.finish(finished), self.release(record))
        else:
            version = await self.runs.finish(finished)
        if version is not None:
            self.histories.saw(
                ConversationRecord(
                    key, record.conversation_id, record.user_id, messages, None, 0, version, finished.updated_at
                )
            )
        # Only once the finish is stored: a reader that sees the end and sends again finds the run committed. (Posted
        # in the same turn, the end could go in a write of its own that reaches the store first: a batching client's
        # writes in flight at once may be applied in either order, e.g. while one of them waits for a new connection.)
        await end()


def _client_makes(record: RunRecord, call: ToolCall) -> bool:
    """A call of a tool the run's client offered, whose arguments could be read: the client makes it, not the hub."""
    return call.error is None and any(t["name"] == call.name for t in record.client_tools)


async def _progress(emit: Emit, call_id: str, text: str) -> None:
    await emit(ToolStatus(call_id, text))


def last_words(messages: list[Message]) -> str:
    """What a finished run said last (its final assistant message), or nothing."""
    last = messages[-1] if messages else None
    return str(last.get("content") or "") if last is not None and last["role"] == "assistant" else ""


def _assistant(turn: ModelTurn) -> Message:
    """What a turn said, as the conversation keeps it."""
    message: Message = {"role": "assistant", "content": turn.text if turn.tool_calls else turn.text or ""}
    if turn.reasoning:
        message["reasoning"] = turn.reasoning
        if turn.reasoning_signature:
            message["reasoning_signature"] = turn.reasoning_signature
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in turn.tool_calls
        ]
    return message


def fitted(model: Model, messages: list[Message], instructions: str | None, tools: list[ToolSpec]) -> list[Message]:
    """The newest of `messages` that fit the model's window, less its answer's room, the instructions and tools."""
    window = model.context_tokens
    if window is None:
        return messages
    fixed = estimate_tokens(instructions or "") + sum(
        estimate_tokens(t.name + t.description + json.dumps(t.input_schema)) for t in tools
    )
    return fit(messages, window - model.max_tokens, fixed)
