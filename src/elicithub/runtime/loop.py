"""The agent run loop: model turns and tool calls, with every step published on the run's stream."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from typing import Any

from elicithub.core.broker import Broker
from elicithub.core.bus import EventBus
from elicithub.core.errors import NotFound
from elicithub.core.events import RunFinished, StreamEvent, TextDelta, ToolCallFinished, ToolCallStarted
from elicithub.runtime.models import Message, Model
from elicithub.runtime.runs import RunCheckpoint, RunRecord, RunStore
from elicithub.runtime.tools import CallContext, Tools

log = logging.getLogger(__name__)

MAX_STEPS = 8


class Runner:
    def __init__(
        self,
        model: Model,
        tools: Tools,
        bus: EventBus[StreamEvent],
        *,
        runs: RunStore | None = None,
        broker: Broker | None = None,
        owner: str = "",
    ) -> None:
        self.model = model
        self.tools = tools
        self.bus = bus
        self.runs = runs
        self.broker = broker
        self.owner = owner

    async def run(self, messages: list[Message], context: CallContext, resume: RunRecord | None = None) -> None:
        """Run until the model answers without tool calls; always ends the stream with RunFinished.

        With `resume`, first finish the tool calls the record says were interrupted, then go on as usual.
        """
        publish = self.bus.publish
        reason = "stop"
        record = resume
        try:
            specs = await self.tools.list_tools(context)
            if resume is not None and resume.tool_calls:
                record = await self._calls(messages, resume.tool_calls, resume.call_index, context, resume)
            for _ in range(MAX_STEPS):
                turn = await self.model.complete(messages, specs)
                if turn.text:
                    publish(context.stream_id, TextDelta(turn.text))
                if not turn.tool_calls:
                    messages.append({"role": "assistant", "content": turn.text or ""})
                    break
                calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.tool_calls]
                messages.append(
                    {
                        "role": "assistant",
                        "content": turn.text,
                        "tool_calls": [
                            {
                                "id": c["id"],
                                "type": "function",
                                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                            }
                            for c in calls
                        ],
                    }
                )
                record = await self._calls(messages, calls, 0, context, record)
            else:
                publish(context.stream_id, TextDelta("Stopped: the model kept calling tools."))
        except asyncio.CancelledError:
            # Shutdown: the run stays on record as it is (paused or running), for a hub to continue it.
            record = None
            raise
        except Exception as exc:
            log.exception("run on stream %s failed", context.stream_id)
            publish(context.stream_id, TextDelta(f"The run failed: {exc}"))
            reason = "error"
        finally:
            if record is not None and self.runs is not None:
                # Paused once, so it is on record: record that it is over (best effort when cancelled).
                try:
                    await self.runs.save(
                        record.with_(messages=list(messages), tool_calls=[], pause=None, status="finished")
                    )
                except BaseException:
                    log.warning("could not record the end of the run in %s", context.conversation_id)
            publish(context.stream_id, RunFinished(reason))

    async def _calls(
        self,
        messages: list[Message],
        calls: list[dict[str, Any]],
        start: int,
        context: CallContext,
        record: RunRecord | None,
    ) -> RunRecord | None:
        """Make the tool calls from `start` on, each with a checkpoint; the run's record, if it ever paused."""
        publish = self.bus.publish
        resume = record.pause if record is not None and record.call_index == start else None
        for index in range(start, len(calls)):
            call = calls[index]
            checkpoint = None
            if self.runs is not None and self.broker is not None:
                base = RunRecord(
                    conversation_id=context.conversation_id,
                    user_id=context.user_id,
                    stream_id=context.stream_id,
                    supports_elicitation=context.supports_elicitation,
                    messages=list(messages),
                    tool_calls=calls,
                    call_index=index,
                    owner=self.owner,
                )
                checkpoint = RunCheckpoint(self.runs, self.broker, base, resume if index == start else None)
            publish(context.stream_id, ToolCallStarted(call["id"], call["name"], call["arguments"]))
            if index == start and resume is not None and resume.kind == "rerun" and self.broker is not None:
                # The call will run again from its start: first let the questions it asked before be answered.
                for elicitation_id in resume.elicitation_ids.values():
                    with contextlib.suppress(NotFound):
                        await self.broker.wait(elicitation_id)
            call_context = dataclasses.replace(context, checkpoint=checkpoint)
            outcome = await self.tools.call(call["name"], call["arguments"], call_context)
            publish(context.stream_id, ToolCallFinished(call["id"], call["name"], outcome.text, outcome.is_error))
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": outcome.text, "is_error": outcome.is_error}
            )
            if checkpoint is not None and (checkpoint.paused or record is not None):
                # The call is done: never make it again, even if the process dies before the run ends.
                record = checkpoint.record.with_(
                    messages=list(messages), call_index=index + 1, pause=None, status="running"
                )
                assert self.runs is not None
                await self.runs.save(record)
        return record
