"""The Conversations service without HTTP: send, answer, follow and pending over real backends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer
from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    RunFinished,
    RunPaused,
    RunStarted,
    StepStarted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
)
from elicithub.core.ports import Backend
from elicithub.core.runs import ToolCall, conversation_key
from elicithub.errors import BadRequest, ConversationNotFound, ElicitationNotFound
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.runtime.loop import Runner
from elicithub.runtime.models import Completing, ModelTurn, ScriptedModel, ToolSpec
from elicithub.runtime.stream import RunStream
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.store import open_backend
from tests.core_fixtures import question
from tests.store.test_conversation_messages import write_old_conversation

pytestmark = pytest.mark.anyio

ALICE = Caller("alice", supports_elicitation=True)
BOB = Caller("bob", supports_elicitation=True)
ASK = "/call t.ask {}"


class AskingTools:
    """`t.ask` asks which region through the run's asker and returns the answer; `t.late` does the same once `go`
    is set (having set `entered`), so a test can act between the call's start and its question."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def list_tools(self, context: CallContext | None = None) -> list[ToolSpec]:
        asks = {"type": "object"}
        return [ToolSpec("t.ask", "Asks.", asks), ToolSpec("t.late", "Asks later.", asks), ToolSpec("t.echo", "", {})]

    async def call(self, name: str, arguments: dict[str, Any], context: CallContext) -> ToolOutcome:
        self.calls += 1
        if name == "t.echo":
            return ToolOutcome("echoed")
        if name == "t.late":
            self.entered.set()
            await self.go.wait()
        assert context.asker is not None and context.user_id is not None
        asked = question(30, conversation_id=context.conversation_id, user_id=context.user_id, run_id=context.run_id)
        [resolution] = await context.asker.ask([asked], trigger="test")
        region = (resolution.content or {}).get("region")
        return ToolOutcome(f"{resolution.outcome}: {region}", is_error=resolution.outcome != "accepted")


class Instance:
    """One hub instance's service over a backend (several may share one)."""

    def __init__(self, backend: Backend, name: str) -> None:
        self.stream = RunStream(backend.events)
        self.broker = Broker(backend.elicitations, self.stream, durable=backend.durable)
        self.tools = AskingTools()
        runner = Runner(ScriptedModel(), self.tools, self.broker, self.stream, backend.runs, backend.conversations)
        self.conversations = Conversations(backend, self.broker, runner, self.stream, name)

    async def close(self) -> None:
        await self.conversations.close()
        await self.broker.close()


@asynccontextmanager
async def instance(backend: Backend, name: str = "hub-a") -> AsyncIterator[Instance]:
    made = Instance(backend, name)
    await made.broker.start()
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture(params=["memory", "sqlite"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    opened = open_backend("memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'hub.db'}")
    yield opened
    await opened.close()


async def events_until(followed: AsyncIterator[tuple[int, StreamEvent]], kind: type) -> list[StreamEvent]:
    seen: list[StreamEvent] = []
    async with asyncio.timeout(10):
        async for _, event in followed:
            seen.append(event)
            if isinstance(event, kind):
                return seen
    return seen


async def started(hub: Instance, caller: Caller, conversation: str | None, text: str) -> tuple[str, Any]:
    sent = await hub.conversations.send(caller, conversation, text)
    followed = await hub.conversations.follow(caller, sent.conversation_id, run_id=sent.run_id, after=sent.after)
    return sent.conversation_id, followed.events


async def test_a_run_pauses_with_its_question_and_finishes_after_the_answer(backend: Backend) -> None:
    async with instance(backend) as hub:
        conversation, events = await started(hub, ALICE, "chat-1", ASK)
        first = await events_until(events, RunPaused)
        assert [type(e) for e in first] == [RunStarted, StepStarted, ToolCall, ElicitationRequested, RunPaused]
        asked = first[3]
        assert isinstance(asked, ElicitationRequested)
        assert [e.id for e in await hub.conversations.pending(ALICE, conversation)] == [asked.elicitation.id]

        answered = await hub.conversations.answer(ALICE, asked.elicitation.id, Answer("accept", {"region": "eu"}))
        assert answered.resolution.outcome == "accepted" and answered.followed
        rest = await events_until(events, RunFinished)
        assert [type(e) for e in rest] == [ElicitationResolved, ToolCallFinished, StepStarted, TextDelta, RunFinished]
        assert isinstance(rest[3], TextDelta) and rest[3].text == "accepted: eu"
        assert await hub.conversations.pending(ALICE, conversation) == []
        record = await hub.conversations.get(ALICE, conversation)
        assert record.active_run_id is None
        assert [m["role"] for m in record.messages] == ["user", "assistant", "tool", "assistant"]
        assert await hub.conversations.reattach(ALICE, conversation) is None  # nothing runs: reattach gets 204


async def test_a_second_message_cancels_the_question_and_runs_without_waiting(backend: Backend) -> None:
    async with instance(backend) as hub:
        conversation, old = await started(hub, ALICE, "chat-2", ASK)
        asked = next(e for e in await events_until(old, RunPaused) if isinstance(e, ElicitationRequested))
        async with asyncio.timeout(5):  # never waits for the first run
            _, new = await started(hub, ALICE, conversation, "/call t.echo {}")
        old_rest = await events_until(old, RunFinished)
        assert ElicitationResolved(asked.elicitation.id, "cancelled") in old_rest
        new_events = await events_until(new, RunFinished)
        assert TextDelta("echoed") in new_events
        with pytest.raises(Exception, match="already cancelled"):
            await hub.conversations.answer(ALICE, asked.elicitation.id, Answer("accept", {"region": "eu"}))
        for _ in range(50):
            record = await hub.conversations.get(ALICE, conversation)
            if record.active_run_id is None:
                break
            await asyncio.sleep(0.02)
        # The superseded run commits nothing: the transcript is the two messages and the new run's work.
        texts = [m.get("content") for m in record.messages if m["role"] in ("user", "assistant")]
        assert texts == [ASK, "/call t.echo {}", None, "echoed"]


async def test_a_question_opened_just_after_the_run_was_superseded_is_cancelled_at_once(backend: Backend) -> None:
    async with instance(backend) as hub:
        conversation, old = await started(hub, ALICE, "chat-late", "/call t.late {}")
        async with asyncio.timeout(5):
            await hub.tools.entered.wait()
        # The new message supersedes the run while its call has not asked yet: there is nothing to cancel now.
        _, new = await started(hub, ALICE, conversation, "/call t.echo {}")
        assert TextDelta("echoed") in await events_until(new, RunFinished)
        hub.tools.go.set()  # the old call asks only now
        rest = await events_until(old, RunFinished)  # and its stream ends without waiting for anyone
        [asked] = [e for e in rest if isinstance(e, ElicitationRequested)]
        assert ElicitationResolved(asked.elicitation.id, "cancelled") in rest
        assert ToolCallFinished("call_1", "t.late", "cancelled: None", True) in rest
        assert not any(isinstance(e, RunPaused) for e in rest)
        assert await hub.conversations.pending(ALICE, conversation) == []
        stored = await hub.broker.store.get(asked.elicitation.id)
        assert stored is not None and stored.outcome == "cancelled"


async def test_a_stopped_run_cancels_its_question_ends_and_keeps_nothing(backend: Backend) -> None:
    async with instance(backend) as hub:
        conversation, events = await started(hub, ALICE, "chat-stop", ASK)
        asked = next(e for e in await events_until(events, RunPaused) if isinstance(e, ElicitationRequested))
        run_id = asked.elicitation.run_id
        assert not await hub.conversations.stop(BOB, conversation, run_id)  # not Bob's conversation
        assert await hub.conversations.stop(ALICE, conversation, run_id)
        rest = await events_until(events, RunFinished)
        assert ElicitationResolved(asked.elicitation.id, "cancelled") in rest
        assert not await hub.conversations.stop(ALICE, conversation, run_id)  # once
        record = await hub.conversations.get(ALICE, conversation)
        assert record.active_run_id is None and [m["content"] for m in record.messages] == [ASK]


class AskThenEcho(Completing):
    """A model that makes two calls in one turn, `t.ask` then `t.echo`, and says what they gave after."""

    name = "ask-then-echo"

    def __init__(self) -> None:
        self.turns = 0

    async def complete(self, messages: list[Any], tools: list[ToolSpec]) -> ModelTurn:
        self.turns += 1
        if messages[-1]["role"] == "tool":
            return ModelTurn(text="done")
        return ModelTurn(tool_calls=[ToolCall("call_1", "t.ask", {}), ToolCall("call_2", "t.echo", {})])


async def test_a_run_stopped_while_a_call_waits_makes_no_more_calls_and_no_more_turns(backend: Backend) -> None:
    async with instance(backend) as hub:
        model = hub.conversations.runner.model = AskThenEcho()
        conversation, events = await started(hub, ALICE, "chat-stop-two", "ask, then echo")
        asked = next(e for e in await events_until(events, RunPaused) if isinstance(e, ElicitationRequested))
        assert await hub.conversations.stop(ALICE, conversation, asked.elicitation.run_id)
        rest = await events_until(events, RunFinished)
        assert hub.tools.calls == 1 and model.turns == 1  # t.echo never called, the model never asked again
        assert ToolCallFinished("call_1", "t.ask", "cancelled: None", True) in rest  # the call hears the stop
        assert rest[-1] == RunFinished("superseded")


async def test_a_message_to_a_conversation_stored_in_an_earlier_form_goes_in_by_compare_and_set(
    backend: Backend,
) -> None:
    if not backend.durable:
        pytest.skip("an in-process store keeps no records of an earlier version")
    said = [{"role": "user", "content": "before"}, {"role": "assistant", "content": "then"}]
    old = {"key": conversation_key("alice", "chat-old"), "id": "chat-old", "user_id": "alice", "messages": said}
    await write_old_conversation(
        backend, {**old, "active_run_id": None, "active_run_after": 0, "version": 3, "updated_at": 1.0}
    )
    async with instance(backend) as hub:
        _, events = await started(hub, ALICE, "chat-old", "/call t.echo {}")
        assert TextDelta("echoed") in await events_until(events, RunFinished)
        record = await hub.conversations.get(ALICE, "chat-old")
        assert record.messages[:3] == [*said, {"role": "user", "content": "/call t.echo {}"}]
        assert record.messages[-1] == {"role": "assistant", "content": "echoed"}
        assert (record.active_run_id, record.version) == (None, 5)  # the message, then the run's words


async def test_the_transcript_of_a_paused_run_ends_with_its_call_and_after_the_end_is_the_conversations(
    backend: Backend,
) -> None:
    async with instance(backend) as hub:
        conversation, events = await started(hub, ALICE, "chat-transcript", ASK)
        asked = [e for e in await events_until(events, RunPaused) if isinstance(e, ElicitationRequested)]

        paused = await hub.conversations.transcript(ALICE, conversation)
        assert [m["role"] for m in paused] == ["user", "assistant"]
        assert [c["function"]["name"] for c in paused[-1]["tool_calls"]] == ["t.ask"]
        with pytest.raises(ConversationNotFound):
            await hub.conversations.transcript(BOB, conversation)

        await hub.conversations.answer(ALICE, asked[0].elicitation.id, Answer("accept", {"region": "eu"}))
        await events_until(events, RunFinished)
        ended = await hub.conversations.transcript(ALICE, conversation)
        assert ended == (await hub.conversations.get(ALICE, conversation)).messages
        assert [m["role"] for m in ended] == ["user", "assistant", "tool", "assistant"]


async def test_conversation_ids_are_scoped_to_their_user(backend: Backend) -> None:
    async with instance(backend) as hub:
        await started(hub, ALICE, "shared-name", "hello")
        await started(hub, BOB, "shared-name", "hello too")  # Bob is not locked out of the name
        alice = await hub.conversations.get(ALICE, "shared-name")
        bob = await hub.conversations.get(BOB, "shared-name")
        assert alice.key != bob.key
        assert alice.messages[0]["content"] == "hello" and bob.messages[0]["content"] == "hello too"
        with pytest.raises(ConversationNotFound):
            await hub.conversations.get(Caller("carol"), "shared-name")


async def test_anonymous_callers_get_server_issued_ids_bound_to_their_secret(backend: Backend) -> None:
    async with instance(backend) as hub:
        anonymous = Caller(None, anonymous="first-callers-secret")
        chosen, _ = await started(hub, anonymous, "guessable", "hi")
        assert chosen != "guessable" and chosen.startswith("conv_")
        again, _ = await started(hub, anonymous, chosen, "again")
        assert again == chosen  # its holder continues it
        with pytest.raises(ConversationNotFound):
            await hub.conversations.get(ALICE, chosen)
        # Another anonymous caller who learns the id gets a conversation of their own, and not the transcript.
        other = Caller(None, anonymous="second-callers-secret")
        theirs, _ = await started(hub, other, chosen, "hello?")
        assert theirs != chosen
        with pytest.raises(ConversationNotFound):
            await hub.conversations.get(other, chosen)
        with pytest.raises(ConversationNotFound):
            await hub.conversations.get(Caller(None), chosen)
        mine = (await hub.conversations.get(anonymous, chosen)).messages
        assert [m["content"] for m in mine if m["role"] == "user"] == ["hi", "again"]


@pytest.mark.parametrize("bad", ["", "a" * 129, "emoji-\U0001f600", "cr\r\nlf", "has space", "a:b", "a/b"])
async def test_bad_conversation_ids_are_refused_before_anything_runs(backend: Backend, bad: str) -> None:
    async with instance(backend) as hub:
        with pytest.raises(BadRequest):
            await hub.conversations.send(ALICE, bad, ASK)
        assert hub.tools.calls == 0 and hub.conversations.running() == 0


async def test_unknown_or_foreign_answers_are_not_found(backend: Backend) -> None:
    async with instance(backend) as hub:
        conversation, events = await started(hub, ALICE, "chat-3", ASK)
        asked = next(e for e in await events_until(events, RunPaused) if isinstance(e, ElicitationRequested))
        with pytest.raises(ElicitationNotFound):
            await hub.conversations.answer(BOB, asked.elicitation.id, Answer("decline"))
        with pytest.raises(ElicitationNotFound):
            await hub.conversations.answer(ALICE, "eli_unknown", Answer("decline"))
        with pytest.raises(ElicitationNotFound):
            await hub.conversations.answer(ALICE, asked.elicitation.id, Answer("decline"), "another-conversation")
        await hub.conversations.answer(ALICE, asked.elicitation.id, Answer("decline"), conversation)
        assert TextDelta("Tool error: declined: None") in await events_until(events, RunFinished)


async def test_another_instance_follows_answers_and_sees_the_continuation(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path / 'hub.db'}")
    try:
        async with instance(backend, "hub-a") as a, instance(backend, "hub-b") as b:
            conversation, _ = await started(a, ALICE, "chat-4", ASK)
            followed = await b.conversations.reattach(ALICE, conversation)  # a reader on B, from the run's start
            assert followed is not None
            on_b = followed.events
            before = await events_until(on_b, RunPaused)
            asked = next(e for e in before if isinstance(e, ElicitationRequested))
            assert isinstance(before[0], RunStarted)
            await b.conversations.answer(ALICE, asked.elicitation.id, Answer("accept", {"region": "us"}))
            after = await events_until(on_b, RunFinished)
            assert TextDelta("accepted: us") in after
            resolved = [e for e in after if isinstance(e, ElicitationResolved)]
            assert len(resolved) == 1  # announced by both instances, read once
    finally:
        await backend.close()


async def test_a_restarted_instance_continues_its_paused_run(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path / 'hub.db'}")
    try:
        async with instance(backend, "hub-a") as a:
            conversation, events = await started(a, ALICE, "chat-5", ASK)
            asked = next(e for e in await events_until(events, RunPaused) if isinstance(e, ElicitationRequested))
        # hub-a stopped (its run cancelled, its question kept open); it starts again under the same name.
        async with instance(backend, "hub-a") as again:
            assert await again.conversations.recover() == 1
            followed = await again.conversations.reattach(ALICE, conversation)
            assert followed is not None
            await again.conversations.answer(ALICE, asked.elicitation.id, Answer("accept", {"region": "eu"}))
            assert TextDelta("accepted: eu") in await events_until(followed.events, RunFinished)
            assert again.tools.calls == 1  # a rerun of the call: asked again, answered from the store
    finally:
        await backend.close()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def every_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
    else:
        url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'hub.db'}"
    opened = open_backend(url)
    yield opened
    await opened.close()


async def numbered_until(followed: AsyncIterator[tuple[int, StreamEvent]], kind: type) -> list[tuple[int, Any]]:
    seen: list[tuple[int, Any]] = []
    async with asyncio.timeout(10):
        async for seq, event in followed:
            seen.append((seq, event))
            if isinstance(event, kind):
                break
    return seen


async def finished_run(hub: Instance, conversation: str) -> tuple[str, list[tuple[int, Any]]]:
    """A run that asked, was answered and has finished (its reader saw RunFinished): its id and numbered events."""
    sent = await hub.conversations.send(ALICE, conversation, ASK)
    followed = await hub.conversations.follow(ALICE, conversation, run_id=sent.run_id, after=sent.after)
    seen = await numbered_until(followed.events, RunPaused)
    asked = next(e for _, e in seen if isinstance(e, ElicitationRequested))
    await hub.conversations.answer(ALICE, asked.elicitation.id, Answer("accept", {"region": "eu"}))
    seen += await numbered_until(followed.events, RunFinished)
    assert isinstance(seen[-1][1], RunFinished)
    return sent.run_id, seen


async def test_a_reader_back_after_the_run_finished_gets_the_rest_through_the_finish(every_backend: Backend) -> None:
    async with instance(every_backend) as hub:
        run_id, seen = await finished_run(hub, "chat-back")
        assert (await hub.conversations.get(ALICE, "chat-back")).active_run_id is None
        paused_at = next(seq for seq, e in seen if isinstance(e, RunPaused))
        followed = await hub.conversations.reattach(ALICE, "chat-back", resume=(run_id, paused_at))
        assert followed is not None and followed.run_id == run_id
        rest = await numbered_until(followed.events, RunFinished)
        # A model's text is numbered with the position before it when it came live, with its turn's end when read
        # back from the log: the events are the same, in the same order.
        assert [e for _, e in rest] == [e for seq, e in seen if seq > paused_at]
        assert all(seq > paused_at for seq, _ in rest)
        assert TextDelta("accepted: eu") in [e for _, e in rest]


async def test_a_reader_back_after_the_finish_or_with_a_foreign_id_gets_nothing(every_backend: Backend) -> None:
    async with instance(every_backend) as hub:
        run_id, seen = await finished_run(hub, "chat-done")
        assert await hub.conversations.reattach(ALICE, "chat-done", resume=(run_id, seen[-1][0])) is None
        assert await hub.conversations.reattach(ALICE, "chat-done", resume=("run_other", 1)) is None
        assert await hub.conversations.reattach(ALICE, "chat-done", resume=(run_id, 10_000)) is None
        with pytest.raises(ConversationNotFound):  # another user's conversation stays unknown, id or not
            await hub.conversations.reattach(BOB, "chat-done", resume=(run_id, 1))


async def test_a_reader_back_after_the_finish_follows_the_run_that_came_next(backend: Backend) -> None:
    async with instance(backend) as hub:
        run_id, seen = await finished_run(hub, "chat-next")
        _, events = await started(hub, ALICE, "chat-next", ASK)
        await events_until(events, RunPaused)
        followed = await hub.conversations.reattach(ALICE, "chat-next", resume=(run_id, seen[-1][0]))
        assert followed is not None and followed.run_id != run_id
        replayed = [e for _, e in await numbered_until(followed.events, RunPaused)]
        assert isinstance(replayed[0], RunStarted) and ElicitationRequested in [type(e) for e in replayed]


async def test_a_run_whose_rest_the_log_no_longer_keeps_is_not_replayed_with_a_gap() -> None:
    backend = open_backend("memory://", events_max_len=4)
    try:
        async with instance(backend) as hub:
            run_id, seen = await finished_run(hub, "chat-trimmed")
            assert await hub.conversations.reattach(ALICE, "chat-trimmed", resume=(run_id, seen[0][0])) is None
            kept = await backend.events.last(conversation_key("alice", "chat-trimmed")) - 4  # all that follows it
            followed = await hub.conversations.reattach(ALICE, "chat-trimmed", resume=(run_id, kept))
            assert followed is not None
            assert await numbered_until(followed.events, RunFinished) == [(q, e) for q, e in seen if q > kept]
    finally:
        await backend.close()


@pytest.mark.parametrize("store", ["sqlite", "redis"])
async def test_another_instance_replays_a_run_that_finished_on_the_first(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path / 'hub.db'}" if store == "sqlite" else request.getfixturevalue("redis_url")
    # SQLite serves one process, so its instances share one backend; Redis instances each connect on their own.
    first = open_backend(url)
    second = first if store == "sqlite" else open_backend(url)
    try:
        async with instance(first, "hub-a") as a, instance(second, "hub-b") as b:
            run_id, seen = await finished_run(a, "chat-moved")
            asked_at = next(seq for seq, e in seen if isinstance(e, ElicitationRequested))
            followed = await b.conversations.reattach(ALICE, "chat-moved", resume=(run_id, asked_at))
            assert followed is not None
            rest = await numbered_until(followed.events, RunFinished)
            assert [e for _, e in rest] == [e for seq, e in seen if seq > asked_at]
            assert await b.conversations.reattach(ALICE, "chat-moved", resume=(run_id, seen[-1][0])) is None
    finally:
        await first.close()
        if second is not first:
            await second.close()
