"""The one ask path: a round is recorded, opened and waited for; a run that has lost its conversation meanwhile gets
its questions cancelled at once instead of waiting for a person who moved on."""

from __future__ import annotations

import asyncio

import pytest

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Elicitation, State
from elicithub.core.events import ElicitationRequested, ElicitationResolved, RunPaused, StreamEvent
from elicithub.core.runs import Pause
from elicithub.runtime.asker import Asker
from elicithub.store import MemoryElicitations
from tests.core_fixtures import question

pytestmark = pytest.mark.anyio


class Run:
    """What the run loop gives an asker (where the pause is saved, where the run's events go, whether it is still
    the conversation's run), and the stream the broker shows questions on."""

    def __init__(self, active: bool) -> None:
        self.is_active = active
        self.pauses: list[Pause] = []
        self.emitted: list[StreamEvent] = []
        self.shown: list[StreamEvent] = []
        self.paused = asyncio.Event()

    async def save(self, pause: Pause) -> None:
        self.pauses.append(pause)

    async def emit(self, event: StreamEvent) -> None:
        self.emitted.append(event)
        self.paused.set()

    async def active(self) -> bool:
        return self.is_active

    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
        self.shown.append(event)


async def test_a_question_asked_after_the_run_was_superseded_is_cancelled_at_once() -> None:
    store, run = MemoryElicitations(), Run(active=False)
    broker = Broker(store, run)
    asker = Asker(broker, save=run.save, emit=run.emit, active=run.active)
    first, second = question(30, run_id="run_1"), question(30, run_id="run_1", message="How many?")
    async with asyncio.timeout(5):  # it never waits for an answer
        resolutions = await asker.ask([first, second], trigger="test")
    assert [r.outcome for r in resolutions] == ["cancelled", "cancelled"]
    for asked in (first, second):
        stored = await store.get(asked.id)
        assert stored is not None and stored.state is State.CANCELLED
    assert run.pauses == [Pause("test", {"0": first.id, "1": second.id})]  # on record before being opened
    assert run.emitted == []  # the run never says it waits on them
    assert run.shown == [
        ElicitationRequested(first),
        ElicitationRequested(second),
        ElicitationResolved(first.id, "cancelled"),
        ElicitationResolved(second.id, "cancelled"),
    ]


async def test_an_active_run_waits_for_the_answer() -> None:
    store, run = MemoryElicitations(), Run(active=True)
    broker = Broker(store, run)
    asker = Asker(broker, save=run.save, emit=run.emit, active=run.active)
    asked = question(30, run_id="run_1")
    waiting = asyncio.create_task(asker.ask([asked], trigger="test"))
    async with asyncio.timeout(5):
        await run.paused.wait()
    assert run.emitted == [RunPaused((asked.id,))]
    stored = await store.get(asked.id)
    assert stored is not None and stored.state is State.PENDING and not waiting.done()
    await broker.cancel([asked.id])
    async with asyncio.timeout(5):
        [resolution] = await waiting
    assert resolution.outcome == "cancelled"
