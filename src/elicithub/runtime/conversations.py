"""The Conversations service: send, answer, follow, pending and the questions' own operations — the one API every
surface and page calls.

A conversation lives in the store, scoped to its user; it has at most one active run (compare-and-set on the
record), whose events go to the conversation's log in the store. So any instance can take a message, an answer
or a reader for any conversation, and runs of an instance that stopped are continued by another (or by itself
after a restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from elicithub.config import LimitsConfig
from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, Elicitation, Expire, Invalid, Outcome, State, decide, new_id, utcnow
from elicithub.core.ids import anonymous_conversation_id, check_conversation_id, held_by
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import Backend
from elicithub.core.runs import (
    ClientTool,
    ConversationRecord,
    FunctionCall,
    Message,
    RunRecord,
    ToolCall,
    conversation_key,
    waiting_calls,
)
from elicithub.core.waiting import Resolution
from elicithub.errors import (
    ConversationNotFound,
    ElicitationNotFound,
    Expired,
    HubError,
    InvalidContent,
    SelfApprovalRefused,
    ToolCallNotFound,
)
from elicithub.runtime.histories import add_message
from elicithub.runtime.limits import Limits
from elicithub.runtime.loop import Runner
from elicithub.runtime.running import Running
from elicithub.runtime.stream import RunStream
from elicithub.runtime.taken import Answered, Followed, Following, Sent


@dataclass(frozen=True)
class Offered:
    """What a caller's client offers one run: tools it makes itself, beside the agent's own (a call of one ends the
    run, see `send_results`), and words added to the agent's instructions."""

    tools: Sequence[ClientTool] = ()
    instructions: str = ""


@dataclass(frozen=True)
class Caller:
    """Who is asking, and whether their client can show questions (`x-supports-elicitation`)."""

    user_id: str | None
    supports_elicitation: bool = False
    surface: str = "chat"
    """chat (the hub's HTTP API: the widget, the inbox, clients), mcp, a2a, agui, slack or email: a tool that cannot
    ask its person says what to change in these words, and the audit names it as the channel of an answer."""
    modes: frozenset[str] = frozenset({"form", "url"})
    """The question modes the client can show (an MCP client declares them)."""
    anonymous: str | None = None
    """Without a user: the caller's own secret (a cookie), which the conversations the hub issues them are bound to."""
    groups: frozenset[str] = frozenset()
    """The groups their identity provider puts them in (the hub's own `groups:` are added): who may answer an
    approval."""
    counted_as: tuple[str, ...] = ()
    """Without a user: whom the limits count their requests against (their cookie, their address)."""


def is_open(elicitation: Elicitation) -> bool:
    """Whether a question still waits for an answer: pending, and not past its deadline."""
    return elicitation.state is State.PENDING and not elicitation.is_due(utcnow())


class Conversations:
    def __init__(
        self,
        backend: Backend,
        broker: Broker,
        runner: Runner,
        stream: RunStream,
        instance: str,
        groups: Mapping[str, Collection[str]] | None = None,
        limits: Limits | None = None,
    ) -> None:
        """`limits`: what a caller may start (none without)."""
        self.backend = backend
        self.limits = limits or Limits(LimitsConfig(), backend.kv)
        self.groups = groups or {}
        """The hub's static groups (`groups:`), by name."""
        self.broker = broker
        self.runner = runner
        self.stream = stream
        self.instance = instance
        self._running = Running(backend.runs, broker, runner, instance)
        self._readers: Counter[str] = Counter()
        self._reader_kinds: Counter[str] = Counter()

    def watch(self, watcher: Callable[[RunRecord], None]) -> None:
        """Tell `watcher` of each run as it starts or resumes on this instance. A surface that shows runs in a
        place of its own (a Slack thread) follows each run where it runs, so exactly one instance shows it,
        and the showing moves with the run (a restart, a takeover)."""
        self._running.watch(watcher)

    # -- conversations and their runs

    async def send(
        self,
        caller: Caller,
        conversation_id: str | None,
        text: str,
        *,
        agent: str = "assistant",
        history: list[Message] | None = None,
        client: Offered | None = None,
    ) -> Sent:
        """Add the caller's message and start a run of `agent`; a run still going in the conversation is
        superseded. `history` seeds a conversation the hub does not know yet (an OpenAI client sends it all);
        `client`: what the caller's client offers the run."""
        message: Message = {"role": "user", "content": text}
        return await self._add(caller, conversation_id, [*(history or []), message], 1, agent, client)

    async def call(self, caller: Caller, name: str, arguments: JsonObject) -> Sent:
        """Make one call of tool `name` for the caller (`/mcp`'s tools/call of SERVER.TOOL), in a conversation of its
        own: a run whose model turn is that call, so it goes through what an agent's call does (its gates, its
        questions, checkpoints and takeover), and ends with it."""
        call = ToolCall(new_id("call"), name, arguments)
        function: FunctionCall = {"name": name, "arguments": json.dumps(arguments)}
        message: Message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call.call_id, "type": "function", "function": function}],
        }
        return await self._add(caller, None, [message], 1, name, None, call)

    async def send_results(
        self,
        caller: Caller,
        conversation_id: str,
        results: list[Message],
        *,
        agent: str = "assistant",
        client: Offered | None = None,
    ) -> Sent:
        """Add the results (one or more tool messages) of the calls a run handed over to the caller's client (it
        ended `client_tool`) and start a run of `agent` that goes on from them: the model is asked again. A result
        for a call the conversation holds one for already is passed over (a client sends its whole thread); one for
        a call that does not wait for a result refuses them all (ToolCallNotFound), and nothing is taken."""
        ids = [str(r.get("tool_call_id")) for r in results]
        try:
            told = await self.transcript(caller, conversation_id)
        except ConversationNotFound:
            raise ToolCallNotFound(ids[0]) from None
        waiting = set(waiting_calls(told))
        answered = {m.get("tool_call_id") for m in told if m["role"] == "tool"}
        new: list[Message] = []
        for call_id, result in zip(ids, results, strict=True):
            if call_id in waiting:
                waiting.remove(call_id)  # a second result for it is refused
                new.append(result)
            elif call_id not in answered:
                raise ToolCallNotFound(call_id)
        if not new:
            raise ToolCallNotFound(", ".join(ids))
        return await self._add(caller, conversation_id, new, len(new), agent, client)

    async def _add(
        self,
        caller: Caller,
        conversation_id: str | None,
        messages: list[Message],
        count: int,
        agent: str,
        client: Offered | None,
        direct: ToolCall | None = None,
    ) -> Sent:
        """Add the last `count` of `messages` (all of them to a conversation the hub does not know) and start a run
        of `agent` from the conversation as it then is (`direct`: the run makes that call, and no model turn), if the
        limits let the caller start one (else Overloaded or RateLimited, and nothing is added)."""
        run_id = new_id("run")
        async with self.limits.admission(caller, run_id, self._running.running()) as held:
            conversation_id = await self._id_for(caller, conversation_id)
            key = conversation_key(caller.user_id, conversation_id)
            new = ConversationRecord(key, conversation_id, caller.user_id, messages, run_id, updated_at=time.time())
            record, superseded = await add_message(self.backend, self.runner.histories, new, count)
            if superseded is not None:
                await self._supersede(key, superseded)
            client = client or Offered()
            run = RunRecord(
                run_id,
                conversation_id,
                caller.user_id,
                caller.supports_elicitation,
                record.messages,
                agent=agent,
                owner=self.instance,
                updated_at=time.time(),
                surface=caller.surface,
                modes=sorted(caller.modes),
                client_tools=list(client.tools),
                instructions=client.instructions,
                history=len(record.messages),  # all kept with the conversation now: the run's saves refer to them
                tool_calls=[direct] if direct is not None else [],
                direct=direct is not None,
                limited_as=held,
            )
            self._running.start(run, resumed=False)
        return Sent(conversation_id, run_id, record.active_run_after)

    async def answer(
        self,
        caller: Caller,
        elicitation_id: str,
        answer: Answer,
        conversation_id: str | None = None,
        *,
        own: bool = False,
    ) -> Answered:
        """Take a person's answer; raises NotFound, AlreadyResolved, Expired or InvalidContent (SelfApprovalRefused
        for an approval). `own`: only a question of the caller's own runs (an answer whose continuation streams to
        them); else also an approval routed to them."""
        groups = self.groups_of(caller)
        answer = replace(answer, via=answer.via or caller.surface)  # the channel it came through, for the audit
        elicitation = await self.broker.lookup(elicitation_id, caller.user_id, conversation_id, groups)
        if own and elicitation.user_id != caller.user_id:
            raise ElicitationNotFound(elicitation_id)
        key = conversation_key(elicitation.user_id, elicitation.conversation_id)
        after = await self.backend.events.last(key)
        # The run's call is read in the same turn as the compare-and-set, so a batching store sends both together.
        read = self._running.read(elicitation.run_id)
        resolution, run = await asyncio.gather(
            self.broker.respond(elicitation.id, answer, caller.user_id, looked_up=elicitation, groups=groups), read
        )
        followed = self._readers[elicitation.run_id] > 0
        if run is not None and run.status == "finished":
            # An answer repeated after its run ended: the run's continuation from that answer on, as it streamed
            # then (or, when the log no longer keeps it, the answer's end alone).
            again = await self.stream.before_end(key, elicitation.run_id, elicitation.id)
            after, followed = (again, False) if again is not None else (after, True)
        call = None
        if run is not None and run.call_index < len(run.tool_calls):
            call = run.tool_calls[run.call_index]
        return Answered(resolution, elicitation.conversation_id, elicitation.run_id, after, followed, call)

    async def follow(self, caller: Caller, conversation_id: str, run_id: str, after: int) -> Following:
        """`run_id`'s events after position `after`, as they come, up to its end."""
        key = self._key(caller, conversation_id)
        # The conversation is read (unknown or another user's: not found) unless the run goes on here, in it.
        if self._running.conversation_of(run_id) != key:
            await self.get(caller, conversation_id, messages=False)
        return Following(run_id, self._follow(key, run_id, after, "chat"))

    async def reattach(
        self,
        caller: Caller,
        conversation_id: str,
        resume: tuple[str, int] | None = None,
        read: tuple[int, int] = (0, 0),
    ) -> Following | None:
        """For a reader coming back: the rest of the run `resume` names after its position (whether that run still
        goes on or has ended since, as long as the log keeps the rest; `read`: what it had of a model turn that
        streamed there), or else the active run's events from its start. None when neither has anything to give."""
        conversation = await self.get(caller, conversation_id, messages=False)
        run_id = conversation.active_run_id
        key = conversation.key
        if resume is not None and resume[0] != run_id and await self.stream.holds(key, resume[0], resume[1]):
            return Following(resume[0], self._follow(key, resume[0], resume[1], "reattached", read))
        if run_id is None:
            return None
        if resume is not None and resume[0] == run_id:
            return Following(run_id, self._follow(key, run_id, resume[1], "reattached", read))
        return Following(run_id, self._follow(key, run_id, conversation.active_run_after, "reattached"))

    async def pending(self, caller: Caller, conversation_id: str) -> list[Elicitation]:
        """The questions the conversation's run waits on now, oldest first."""
        conversation = await self.get(caller, conversation_id, messages=False)
        if conversation.active_run_id is None:
            return []
        run = await self.backend.runs.get(conversation.active_run_id, messages=False)
        if run is None or run.pause is None:
            return []
        waiting = await self.open_questions(caller, run.pause.elicitation_ids.values())
        return sorted(waiting, key=lambda e: e.created_at)

    async def transcript(self, caller: Caller, conversation_id: str) -> list[Message]:
        """The conversation's messages as its person sees them now: its active run's so far (they begin with the
        conversation's own), else those the conversation has kept."""
        conversation = await self.get(caller, conversation_id)
        if conversation.active_run_id is not None:
            run = await self.backend.runs.get(conversation.active_run_id)
            if run is not None and run.status != "finished":
                return run.messages
        return conversation.messages

    async def get(self, caller: Caller, conversation_id: str, *, messages: bool = True) -> ConversationRecord:
        """The caller's conversation (`messages=False`: without its messages); unknown or another user's: not
        found."""
        conversation = await self.backend.conversations.get(self._key(caller, conversation_id), messages=messages)
        if conversation is None:
            raise ConversationNotFound(conversation_id)
        return conversation

    @staticmethod
    def _key(caller: Caller, conversation_id: str) -> str:
        """The store key of the caller's conversation; one an anonymous caller does not hold: not found."""
        check_conversation_id(conversation_id)
        if caller.user_id is None and not held_by(conversation_id, caller.anonymous):
            raise ConversationNotFound(conversation_id)
        return conversation_key(caller.user_id, conversation_id)

    # -- questions, as their person sees them

    def groups_of(self, caller: Caller) -> frozenset[str]:
        """The caller's groups: their identity provider's, and those `groups:` puts them in."""
        user = caller.user_id
        return caller.groups | {g for g, members in self.groups.items() if user is not None and user in members}

    async def question(self, caller: Caller, elicitation_id: str) -> Elicitation:
        """The caller's question (or an approval they may answer); to anyone else it does not exist
        (ElicitationNotFound), and to a requester who may not approve their own call it is refused
        (SelfApprovalRefused)."""
        return await self.broker.lookup(elicitation_id, caller.user_id, groups=self.groups_of(caller))

    async def open_questions(self, caller: Caller, elicitation_ids: Iterable[str]) -> list[Elicitation]:
        """Those of the caller's questions `elicitation_ids` that still wait for their answer, in that order (an
        approval of their call that others answer is not theirs)."""
        found = []
        for elicitation_id in elicitation_ids:
            with contextlib.suppress(ElicitationNotFound, SelfApprovalRefused):
                elicitation = await self.question(caller, elicitation_id)
                if is_open(elicitation):
                    found.append(elicitation)
        return found

    async def check(self, caller: Caller, elicitation_id: str, answer: Answer) -> Elicitation:
        """Whether `answer` fits the caller's question, without taking it: the question, or InvalidContent with
        one error per field, or Expired past its deadline (a client that sends several answers at once has all of
        them checked first, and none taken if one fails)."""
        elicitation = await self.question(caller, elicitation_id)
        decision = decide(elicitation, answer, utcnow())
        if isinstance(decision, Invalid):
            raise InvalidContent(elicitation_id, decision.errors)
        if isinstance(decision, Expire):
            raise Expired(elicitation_id)
        return elicitation

    async def wait(self, caller: Caller, elicitation_id: str) -> Resolution:
        """Wait for the caller's question to end, however it ends (a sign-in completes on the hosted pages)."""
        await self.question(caller, elicitation_id)
        return await self.broker.wait(elicitation_id)

    async def cancel(self, caller: Caller, elicitation_id: str) -> Resolution:
        """End the caller's question without an answer (its client cannot show it); the outcome it ends with."""
        await self.question(caller, elicitation_id)
        return await self.broker.end(elicitation_id, State.CANCELLED)

    async def sign_in_question(self, elicitation_id: str) -> Elicitation | None:
        """The question a hosted sign-in link names, whoever's it is: the page learns whose it may show it to from
        the link's signature, and shows it to nobody else."""
        return await self.backend.elicitations.get(elicitation_id)

    async def complete_sign_in(self, elicitation: Elicitation, connected: bool) -> Outcome:
        """A sign-in finished at the provider (connected or not), taken as its person's answer; the outcome its
        question ends with (an answer that came first, or its deadline, wins)."""
        answer = Answer("accept" if connected else "decline")
        try:
            answered = await self.answer(Caller(elicitation.user_id), elicitation.id, answer)
        except HubError:
            current = await self.sign_in_question(elicitation.id)
            return current.outcome if current is not None and current.outcome else "expired"
        return answered.resolution.outcome

    # -- runs on this instance

    async def _id_for(self, caller: Caller, conversation_id: str | None) -> str:
        if conversation_id is not None:
            check_conversation_id(conversation_id)
            if caller.user_id is not None:
                return conversation_id
            # An anonymous caller continues only a conversation the hub issued to them: its id is bound to their
            # secret, so knowing (or guessing) the id is not enough.
            if held_by(conversation_id, caller.anonymous):
                return conversation_id
        return anonymous_conversation_id(caller.anonymous) if caller.anonymous is not None else new_id("conv")

    async def stop(self, caller: Caller, conversation_id: str, run_id: str) -> bool:
        """Stop a run that is still the conversation's active one (its caller cancelled it): it makes no more
        calls, its questions and its delegated runs' are cancelled, and nothing it says is kept. False when the run
        is no longer active (it ended, or a newer message superseded it)."""
        key = conversation_key(caller.user_id, conversation_id)
        while True:
            current = await self.backend.conversations.get(key, messages=False)
            if current is None or current.active_run_id != run_id:
                return False
            stopped = replace(current, active_run_id=None, version=current.version + 1, updated_at=time.time())
            if await self.backend.conversations.put(stopped, current.version):
                break
        await self._supersede(key, run_id)
        return True

    async def _supersede(self, key: str, run_id: str) -> None:
        """The person moved on: a model turn the earlier run streams ends at once (its request closed), the
        questions it waits on are cancelled, wherever it runs, and so are those of the runs it delegated to, down
        the chain (each waits inside its parent's call). Each run then ends: its call gets the cancellation, and
        it makes no more calls once it is no longer the active run."""
        self.stream.live.stop(key, run_id)
        run = await self.backend.runs.get(run_id, messages=False)
        while run is not None and run.pause is not None:
            await self.broker.cancel(list(run.pause.elicitation_ids.values()))
            child = run.pause.child_run_id
            if child is not None:
                self.stream.live.stop(key, child)
            run = None if child is None else await self.backend.runs.get(child, messages=False)

    async def _follow(self, key: str, run_id: str, after: int, kind: str, read: tuple[int, int] = (0, 0)) -> Followed:
        self._readers[run_id] += 1
        self._reader_kinds[kind] += 1
        try:
            async for item in self.stream.follow(key, run_id, after, read):
                yield item
        finally:
            self._reader_kinds[kind] -= 1
            self._readers[run_id] -= 1
            if self._readers[run_id] <= 0:
                del self._readers[run_id]

    def readers(self, kind: str) -> int:
        """Streams open here: `chat` (a response to a message or an answer) or `reattached`."""
        return self._reader_kinds[kind]

    def running(self) -> int:
        """Runs of this instance: going, or parked while their questions wait."""
        return self._running.running()

    def shed(self) -> None:
        """Overloaded when this hub holds as many runs as it may: for a surface that would do store work of its own
        before it starts a run (`send` sheds too)."""
        self.limits.shed(self._running.running())

    def parked(self) -> int:
        """Runs of this instance parked (or parking): waiting on their questions without a task."""
        return self._running.parked()

    async def recover(self) -> int:
        """Continue the unfinished runs of instances that are gone (and this one's own, after a restart), and the
        runs parked here whose round is over although no notice said so."""
        return await self._running.recover()

    async def purge(self, idle_before: float) -> int:
        """Forget the conversations idle since before `idle_before` (unix seconds): the store's without an active
        run (`ConversationStore.purge`), and the messages this hub holds of any; how many the store forgot."""
        purged = await self.backend.conversations.purge(idle_before)
        self.runner.histories.forget_idle(idle_before)
        return purged

    async def close(self) -> None:
        await self._running.close()
