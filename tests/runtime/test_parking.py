"""Parked runs: a run whose round can be resumed from its pause lets go of its task while the round waits, and goes
on from the store, once, when the round's last question ends (answered, expired, cancelled), on its own instance."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, State
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
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.runtime.loop import Runner
from elicithub.runtime.models import ScriptedModel, ToolSpec
from elicithub.runtime.parking import Parking
from elicithub.runtime.stream import RunStream
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.store import open_backend
from elicithub.store.sqlite import runs as sqlite_runs
from tests.core_fixtures import question, until
from tests.runtime.test_conversations import events_until

pytestmark = pytest.mark.anyio

ALICE = Caller("alice", supports_elicitation=True)


class RoundTools:
    """`t.round {"n": N, "timeout_s": T}` asks N questions as one round it can go on from with its pause alone (as a
    2026-07-28 round): resumed, it reads their answers. It says how each ended."""

    def __init__(self) -> None:
        self.calls = 0

    async def list_tools(self, context: CallContext | None = None) -> list[ToolSpec]:
        return [ToolSpec("t.round", "Asks a round.", {"type": "object"})]

    async def call(self, name: str, arguments: dict[str, Any], context: CallContext) -> ToolOutcome:
        self.calls += 1
        asker = context.asker
        assert asker is not None and context.user_id is not None
        pause = asker.resume_from()
        if pause is not None:
            answers = await asker.answers(pause, resumable=True)
            resolutions = [answers[key] for key in sorted(answers)]
        else:
            n, timeout_s = int(arguments.get("n", 1)), float(arguments.get("timeout_s", 30))
            asked = [
                question(
                    timeout_s, conversation_id=context.conversation_id, user_id=context.user_id, run_id=context.run_id
                )
                for _ in range(n)
            ]
            keys = [str(i) for i in range(n)]
            found = await asker.ask(asked, trigger="test", keys=keys, state={"kind": "test"}, resumable=True)
            resolutions = list(found)
        return ToolOutcome(", ".join(f"{r.outcome}: {(r.content or {}).get('region')}" for r in resolutions if r))


class Instance:
    def __init__(self, backend: Backend, name: str) -> None:
        self.backend = backend
        self.stream = RunStream(backend.events)
        self.broker = Broker(backend.elicitations, self.stream, durable=backend.durable)
        self.tools = RoundTools()
        runner = Runner(ScriptedModel(), self.tools, self.broker, self.stream, backend.runs, backend.conversations)
        self.conversations = Conversations(backend, self.broker, runner, self.stream, name)

    async def send(self, conversation: str, text: str) -> AsyncIterator[tuple[int, StreamEvent]]:
        sent = await self.conversations.send(ALICE, conversation, text)
        followed = await self.conversations.follow(ALICE, conversation, run_id=sent.run_id, after=sent.after)
        return followed.events

    async def parked(self, count: int) -> None:
        """Until `count` runs are parked here and no task runs (a run parks just after its RunPaused is on the
        stream, then its task ends)."""
        await until(lambda: self.conversations.parked() == self.conversations.running() == count)


@pytest.fixture(params=["memory", "sqlite"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    opened = open_backend("memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'hub.db'}")
    yield opened
    await opened.close()


async def started(backend: Backend, name: str = "hub-a") -> Instance:
    made = Instance(backend, name)
    await made.broker.start()
    return made


async def stopped(hub: Instance) -> None:
    await hub.conversations.close()
    await hub.broker.close()


def asked_in(events: list[StreamEvent]) -> list[str]:
    return [e.elicitation.id for e in events if isinstance(e, ElicitationRequested)]


async def test_a_round_parks_its_run_which_goes_on_once_when_its_last_question_ends(backend: Backend) -> None:
    hub = await started(backend)
    try:
        events = await hub.send("park-1", '/call t.round {"n": 2}')
        first = await events_until(events, RunPaused)
        assert [type(e) for e in first] == [
            RunStarted,
            StepStarted,
            ToolCall,
            ElicitationRequested,
            ElicitationRequested,
            RunPaused,
        ]
        await hub.parked(1)
        assert hub.conversations.running() == 1  # parked, it still counts as this instance's run
        assert hub.broker.pending_here() == 2
        one, two = asked_in(first)

        await hub.conversations.answer(ALICE, one, Answer("accept", {"region": "eu"}))
        assert await events_until(events, ElicitationResolved) == [ElicitationResolved(one, "accepted")]
        assert hub.conversations.parked() == 1 and hub.tools.calls == 1  # one of two: it stays parked

        await hub.conversations.answer(ALICE, two, Answer("decline"))
        rest = await events_until(events, RunFinished)
        # What a reader sees is what it sees of a run that waited: no second RunStarted, nor the call again.
        assert [type(e) for e in rest] == [ElicitationResolved, ToolCallFinished, StepStarted, TextDelta, RunFinished]
        assert rest[0] == ElicitationResolved(two, "declined")
        assert rest[3] == TextDelta("accepted: eu, declined: None")
        assert hub.tools.calls == 2  # the call, and its one resumption from the pause
        # The run posts its end before its task is over (its record's save goes with it): a reader may be first.
        await until(lambda: hub.conversations.running() == 0)
        assert hub.conversations.parked() == 0
        assert hub.broker.pending_here() == 0
        record = await hub.conversations.get(ALICE, "park-1")
        assert record.active_run_id is None
        assert [m["role"] for m in record.messages] == ["user", "assistant", "tool", "assistant"]
    finally:
        await stopped(hub)


async def test_a_stopped_parked_run_ends_as_a_waiting_one_does(backend: Backend) -> None:
    hub = await started(backend)
    try:
        events = await hub.send("park-stop", '/call t.round {"n": 2}')
        asked = asked_in(await events_until(events, RunPaused))
        await hub.parked(1)
        record = await hub.conversations.get(ALICE, "park-stop")
        assert record.active_run_id is not None
        assert await hub.conversations.stop(ALICE, "park-stop", record.active_run_id)
        rest = await events_until(events, RunFinished)
        assert [e for e in rest if isinstance(e, ElicitationResolved)] == [
            ElicitationResolved(i, "cancelled") for i in asked
        ]
        # Its call heard, as a waiting one would; and the run ends with it: no more turns, no more calls.
        assert ToolCallFinished("call_1", "t.round", "cancelled: None, cancelled: None", False) in rest
        assert rest[-1] == RunFinished("superseded") and not any(isinstance(e, StepStarted) for e in rest)
        assert hub.conversations.parked() == 0
        record = await hub.conversations.get(ALICE, "park-stop")  # stopped: what it said is not kept
        assert record.active_run_id is None and [m["content"] for m in record.messages] == ['/call t.round {"n": 2}']
    finally:
        await stopped(hub)


async def test_a_new_message_supersedes_a_parked_run(backend: Backend) -> None:
    hub = await started(backend)
    try:
        old = await hub.send("park-new", '/call t.round {"n": 1}')
        [asked] = asked_in(await events_until(old, RunPaused))
        await hub.parked(1)
        new = await hub.send("park-new", "hello")
        rest = await events_until(old, RunFinished)
        assert ElicitationResolved(asked, "cancelled") in rest
        await events_until(new, RunFinished)
        record = await hub.conversations.get(ALICE, "park-new")
        assert not any(m["role"] == "tool" for m in record.messages)  # the superseded run commits nothing
        assert hub.conversations.parked() == 0
    finally:
        await stopped(hub)


async def test_the_sweep_expiring_a_parked_runs_question_resumes_it(backend: Backend) -> None:
    hub = await started(backend)
    try:
        events = await hub.send("park-due", '/call t.round {"n": 1, "timeout_s": 0}')
        [asked] = asked_in(await events_until(events, RunPaused))
        await hub.parked(1)
        assert await hub.broker.expire_due() == 1  # the hub's sweep
        rest = await events_until(events, RunFinished)
        assert rest[0] == ElicitationResolved(asked, "expired")
        assert TextDelta("expired: None") in rest
        assert hub.conversations.parked() == 0
    finally:
        await stopped(hub)


async def test_a_parked_run_is_its_owners_and_a_restart_resumes_and_parks_it_again(redis_url: str) -> None:
    backend = open_backend(redis_url)  # shared by instances, with heartbeats
    try:
        a = await started(backend, "hub-a")
        events = await a.send("park-own", '/call t.round {"n": 1}')
        [asked] = asked_in(await events_until(events, RunPaused))
        await a.parked(1)
        assert await a.conversations.recover() == 0  # its own sweep leaves it parked
        await backend.runs.heartbeat("hub-a", 60)
        b = await started(backend, "hub-b")
        assert await b.conversations.recover() == 0  # its owner lives: not another instance's to take
        await stopped(b)
        await stopped(a)  # a shutdown: the parked run stays on record, its question open

        again = await started(backend, "hub-a")
        try:
            assert await again.conversations.recover() == 1
            await again.parked(1)  # resumed, its round still open: it parks again
            followed = await again.conversations.reattach(ALICE, "park-own")
            assert followed is not None
            await again.conversations.answer(ALICE, asked, Answer("accept", {"region": "eu"}))
            assert TextDelta("accepted: eu") in await events_until(followed.events, RunFinished)
        finally:
            await stopped(again)
    finally:
        await backend.close()


async def test_a_round_that_ended_before_its_task_did_goes_on_once_it_has(backend: Backend) -> None:
    here = Broker(backend.elicitations, RunStream(backend.events), durable=backend.durable)
    elsewhere = Broker(backend.elicitations, RunStream(backend.events), durable=backend.durable)
    await here.start()
    resumed: list[str] = []
    gone_on = asyncio.Event()

    async def resume(run_id: str) -> None:
        resumed.append(run_id)
        gone_on.set()

    parking = Parking(here, resume)
    one, two = question(run_id="run_p"), question(run_id="run_p")
    try:
        parking.hold("run_p", [one.id, two.id])  # as the asker does, before the questions show
        for made in (one, two):
            await here.open(made)
        assert here.pending_here() == 2
        await here.respond(one.id, Answer("accept", {"region": "eu"}), "alice")
        await elsewhere.respond(two.id, Answer("decline"), "alice")  # another instance takes the second
        await until(lambda: here.pending_here() == 0)  # the second heard of through the store's notices
        assert not resumed  # its task has not ended yet
        parking.park("run_p")
        async with asyncio.timeout(10):
            await gone_on.wait()
        assert resumed == ["run_p"] and "run_p" not in parking
        # The end heard from elsewhere is announced again here before the run goes on, as a waiter here would
        # (readers keep the first announcement of each question); the one answered here is announced once.
        # Announcements are written behind: read the log as it fills until all three are there.
        resolved: list[str] = []
        after = 0
        async with asyncio.timeout(10):
            while len(resolved) < 3:
                for seq, data in await backend.events.wait(conversation_key("alice", "conv_1"), after, 5):
                    after = seq
                    if data.get("type") == "elicitation-resolved":
                        resolved.append(data["elicitationId"])
        assert (resolved.count(one.id), resolved.count(two.id)) == (1, 2)
    finally:
        await here.close()


async def test_a_round_let_go_of_hears_nothing_more(backend: Backend) -> None:
    broker = Broker(backend.elicitations, RunStream(backend.events), durable=backend.durable)
    parking = Parking(broker, resume=lambda run_id: asyncio.sleep(0))
    asked = question(run_id="run_r")
    parking.hold("run_r", [asked.id])
    await broker.open(asked)
    parking.release("run_r")  # it waits in its task after all
    assert "run_r" not in parking and broker.pending_here() == 0
    await broker.respond(asked.id, Answer("decline"), "alice")
    assert "run_r" not in parking


async def test_the_sweep_resumes_a_round_past_its_deadline_whose_end_was_not_heard(backend: Backend) -> None:
    deaf = Broker(backend.elicitations, RunStream(backend.events), durable=backend.durable)  # not listening
    elsewhere = Broker(backend.elicitations, RunStream(backend.events), durable=backend.durable)
    resumed: list[str] = []

    async def resume(run_id: str) -> None:
        resumed.append(run_id)

    parking = Parking(deaf, resume)
    asked = question(0, run_id="run_o")  # due at once
    parking.hold("run_o", [asked.id])
    await deaf.open(asked)
    parking.parks("run_o", [asked], [asked.id])
    parking.park("run_o")
    await parking.check_overdue()
    assert "run_o" in parking and not resumed  # still open: the sweep's expire_due ends it (and that is heard)
    await elsewhere.end(asked.id, State.EXPIRED)  # another instance's sweep ends it; no notice reaches this one
    await parking.check_overdue()
    await until(lambda: resumed == ["run_o"])


async def test_a_parked_run_resumes_with_the_history_this_hub_holds_instead_of_reading_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = open_backend(f"sqlite:///{tmp_path / 'hub.db'}")
    read_back: list[int] = []
    reader = sqlite_runs.read_messages

    def counted(db: Any, key: str, count: int) -> Any:
        read_back.append(count)
        return reader(db, key, count)

    monkeypatch.setattr(sqlite_runs, "read_messages", counted)
    hub = await started(backend)
    try:
        for said in ("hello", "still there?"):
            await events_until(await hub.send("park-long", said), RunFinished)
        events = await hub.send("park-long", '/call t.round {"n": 1}')
        (asked,) = asked_in(await events_until(events, RunPaused))
        await hub.parked(1)

        await hub.conversations.answer(ALICE, asked, Answer("accept", {"region": "eu"}))
        assert TextDelta("accepted: eu") in await events_until(events, RunFinished)
        assert read_back == []  # the five messages it started from came from the hub's own copy
        conversation = await hub.conversations.get(ALICE, "park-long")
        said = [m["content"] for m in conversation.messages if m["role"] == "user"]
        assert said == ["hello", "still there?", '/call t.round {"n": 1}']  # nothing lost on the way
    finally:
        await stopped(hub)
        await backend.close()
