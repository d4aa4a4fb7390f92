"""The broker against both embedded stores: request / respond / end / expire / cancel / purge, and races."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio
import pytest

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, Elicitation, State, utcnow
from elicithub.core.events import ElicitationRequested, ElicitationResolved, StreamEvent
from elicithub.core.ports import ElicitationStore as Store
from elicithub.core.schema import FieldError
from elicithub.core.waiting import Resolution
from elicithub.errors import AlreadyResolved, Expired, InvalidContent, NotFound
from elicithub.store import MemoryElicitations
from tests.core_fixtures import DEADLINE_S, BusSink, question, until

EU = Answer("accept", {"region": "eu"})


@pytest.fixture
async def broker(store: Store) -> AsyncIterator[Broker]:
    started = Broker(store, BusSink())
    await started.start()
    yield started
    await started.close()


@asynccontextmanager
async def asked(
    broker: Broker, elicitation: Elicitation
) -> AsyncIterator[tuple[asyncio.Task[Resolution], asyncio.Queue[StreamEvent]]]:
    """A request waiting in a task of its own, once shown on its run's stream; the queue gets the stream's later
    events for the block."""
    async with broker.events.bus.subscribe(elicitation.run_id) as queue:
        task = asyncio.create_task(broker.request(elicitation))
        assert await next_event(queue) == ElicitationRequested(elicitation)
        yield task, queue


async def start(broker: Broker, elicitation: Elicitation) -> asyncio.Task[Resolution]:
    """A request waiting in a task of its own, once shown on its run's stream."""
    async with asked(broker, elicitation) as (task, _):
        return task


async def next_event(queue: asyncio.Queue[StreamEvent]) -> StreamEvent:
    with anyio.fail_after(DEADLINE_S):
        return await queue.get()


async def finish(task: asyncio.Task[Resolution]) -> Resolution:
    with anyio.fail_after(DEADLINE_S):
        return await task


def drain(queue: asyncio.Queue[StreamEvent]) -> list[StreamEvent]:
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    return events


async def state_of(store: Store, elicitation_id: str) -> State:
    stored = await store.get(elicitation_id)
    assert stored is not None
    return stored.state


@pytest.mark.anyio
async def test_request_publishes_on_its_stream_and_returns_the_answer(broker: Broker) -> None:
    e = question()
    async with broker.events.bus.subscribe("other") as other, asked(broker, e) as (task, mine):
        assert broker.pending_here() == 1
        assert not task.done()

        answer = Answer("accept", {"region": "us", "replicas": 3})
        now = await broker.respond(e.id, answer, "alice", "conv_1")
        waited = await finish(task)

        assert now == waited == Resolution(e.id, "accepted", {"region": "us", "replicas": 3})
        assert drain(mine) == [ElicitationResolved(e.id, "accepted")]
        assert drain(other) == []
    stored = await broker.store.get(e.id)
    assert stored is not None
    assert stored.state is State.ACCEPTED and stored.answer == answer and stored.resolved_at is not None
    assert broker.pending_here() == 0


@pytest.mark.anyio
async def test_request_stores_the_elicitation_as_pending_before_publishing(broker: Broker) -> None:
    e = question()
    task = await start(broker, e)
    assert await broker.lookup(e.id, "alice") == e
    assert await state_of(broker.store, e.id) is State.PENDING
    await broker.respond(e.id, Answer("decline"), "alice")
    assert await finish(task) == Resolution(e.id, "declined", None)


@pytest.mark.anyio
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_wake_the_waiter_without_content(broker: Broker, action: str) -> None:
    e = question()
    task = await start(broker, e)
    resolution = await broker.respond(e.id, Answer(action, {"region": "eu"}), "alice")  # type: ignore[arg-type]
    outcome = {"decline": "declined", "cancel": "cancelled"}[action]
    assert resolution == Resolution(e.id, outcome, None)  # type: ignore[arg-type]
    assert await finish(task) == resolution


@pytest.mark.anyio
async def test_url_mode_accept_resolves_without_content(broker: Broker) -> None:
    e = question(url="http://127.0.0.1:8700/auth/connect?t=x")
    task = await start(broker, e)
    resolution = await broker.respond(e.id, Answer("accept", {"token": "leak"}), "alice")
    assert resolution == Resolution(e.id, "accepted", None)
    assert await finish(task) == resolution
    stored = await broker.store.get(e.id)
    assert stored is not None and stored.answer == Answer("accept")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("user_id", "conversation_id", "which"),
    [("bob", None, None), (None, None, None), ("alice", "conv_other", None), ("alice", "conv_1", "eli_unknown")],
    ids=["another-user", "no-user", "wrong-conversation", "unknown-id"],
)
async def test_respond_to_what_is_not_yours_is_not_found(
    broker: Broker, user_id: str | None, conversation_id: str | None, which: str | None
) -> None:
    e = question()
    task = await start(broker, e)
    target = which or e.id
    with pytest.raises(NotFound) as excinfo:
        await broker.respond(target, EU, user_id, conversation_id)
    assert excinfo.value.code == "not_found"
    assert target in str(excinfo.value)
    with pytest.raises(NotFound):
        await broker.lookup(target, user_id, conversation_id)
    # Nothing happened to the real one; its owner can still answer.
    assert await state_of(broker.store, e.id) is State.PENDING
    assert not task.done()
    assert await broker.respond(e.id, EU, "alice", "conv_1") == Resolution(e.id, "accepted", {"region": "eu"})
    assert (await finish(task)).outcome == "accepted"


@pytest.mark.anyio
async def test_invalid_content_keeps_it_pending_then_a_valid_answer_works(broker: Broker) -> None:
    e = question()
    async with asked(broker, e) as (task, queue):
        with pytest.raises(InvalidContent) as excinfo:
            await broker.respond(e.id, Answer("accept", {"region": "mars", "replicas": 0}), "alice")
        assert excinfo.value.code == "invalid_content"
        assert {error.field for error in excinfo.value.errors} == {"region", "replicas"}
        with pytest.raises(InvalidContent) as excinfo:
            await broker.respond(e.id, Answer("accept", {}), "alice")
        assert excinfo.value.errors == [FieldError("region", "is required")]

        assert await state_of(broker.store, e.id) is State.PENDING
        assert not task.done()
        assert drain(queue) == []  # nothing resolved

        resolution = await broker.respond(e.id, Answer("accept", {"region": "eu", "replicas": 2}), "alice")
        assert resolution == Resolution(e.id, "accepted", {"region": "eu", "replicas": 2})
        assert await finish(task) == resolution


@pytest.mark.anyio
async def test_same_answer_again_returns_the_same_outcome(broker: Broker) -> None:
    e = question()
    async with asked(broker, e) as (task, queue):
        first = await broker.respond(e.id, Answer("accept", {"region": "eu"}), "alice")
        again = await broker.respond(e.id, Answer("accept", {"region": "eu"}), "alice", "conv_1")
        assert first == again == Resolution(e.id, "accepted", {"region": "eu"})
        assert await finish(task) == first
        # The repeat is not a second resolution.
        assert drain(queue) == [ElicitationResolved(e.id, "accepted")]


@pytest.mark.anyio
@pytest.mark.parametrize("second", [Answer("accept", {"region": "us"}), Answer("decline"), Answer("cancel")])
async def test_second_conflicting_answer_is_already_resolved(broker: Broker, second: Answer) -> None:
    e = question()
    task = await start(broker, e)
    await broker.respond(e.id, EU, "alice")
    with pytest.raises(AlreadyResolved) as excinfo:
        await broker.respond(e.id, second, "alice")
    assert excinfo.value.code == "already_resolved"
    assert await finish(task) == Resolution(e.id, "accepted", {"region": "eu"})
    stored = await broker.store.get(e.id)
    assert stored is not None and stored.answer == EU


@pytest.mark.anyio
async def test_unanswered_request_expires_at_its_timeout(broker: Broker) -> None:
    e = question(timeout_s=0.2)
    async with broker.events.bus.subscribe(e.run_id) as queue:
        with anyio.fail_after(DEADLINE_S):
            resolution = await broker.request(e)
        assert resolution == Resolution(e.id, "expired", None)
        assert drain(queue) == [ElicitationRequested(e), ElicitationResolved(e.id, "expired")]
    assert await state_of(broker.store, e.id) is State.EXPIRED
    assert broker.pending_here() == 0


@pytest.mark.anyio
async def test_respond_after_expiry_is_expired(broker: Broker) -> None:
    e = question(timeout_s=0.1)
    with anyio.fail_after(DEADLINE_S):
        assert (await broker.request(e)).outcome == "expired"
    for answer in (EU, Answer("decline"), Answer("cancel")):
        with pytest.raises(Expired) as excinfo:
            await broker.respond(e.id, answer, "alice")
        assert excinfo.value.code == "expired"
    assert await state_of(broker.store, e.id) is State.EXPIRED


@pytest.mark.anyio
async def test_respond_past_deadline_without_waiter_expires_it(broker: Broker) -> None:
    e = question(timeout_s=-1)
    await broker.store.put(e)
    async with broker.events.bus.subscribe(e.run_id) as queue:
        with pytest.raises(Expired):
            await broker.respond(e.id, EU, "alice")
        assert drain(queue) == [ElicitationResolved(e.id, "expired")]
    assert await state_of(broker.store, e.id) is State.EXPIRED


@pytest.mark.anyio
async def test_cancelling_the_waiting_task_cancels_the_elicitation(broker: Broker) -> None:
    e = question()
    async with asked(broker, e) as (task, queue):
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert drain(queue) == [ElicitationResolved(e.id, "cancelled")]
    stored = await broker.store.get(e.id)
    assert stored is not None and stored.state is State.CANCELLED
    assert broker.pending_here() == 0
    # The person's late answer is a conflict with the cancellation, a late cancel is a repeat.
    with pytest.raises(AlreadyResolved):
        await broker.respond(e.id, EU, "alice")
    assert await broker.respond(e.id, Answer("cancel"), "alice") == Resolution(e.id, "cancelled", None)


@pytest.mark.anyio
async def test_cancelling_through_an_anyio_cancel_scope_cancels_the_elicitation(broker: Broker) -> None:
    # anyio (used by the MCP SDK and Starlette) re-delivers cancellation until the task ends, so the cleanup in
    # request() must be finished, not merely started, by the time the cancelled task is done.
    e = question()
    async with broker.events.bus.subscribe(e.run_id) as queue:
        async with anyio.create_task_group() as group:
            group.start_soon(broker.request, e)
            await next_event(queue)
            group.cancel_scope.cancel()
        assert await state_of(broker.store, e.id) is State.CANCELLED
        assert drain(queue) == [ElicitationResolved(e.id, "cancelled")]


@pytest.mark.anyio
async def test_cancelling_a_request_while_it_is_being_stored_raises_cancelled(broker: Broker) -> None:
    # Warm the store's worker threads so the cancel can land while put() is still running in one of them.
    await asyncio.gather(*(broker.store.get("warm-up") for _ in range(8)))
    for _ in range(20):
        e = question()
        task = asyncio.create_task(broker.request(e))
        await asyncio.sleep(0)  # the request is now inside store.put()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await state_of(broker.store, e.id) is State.CANCELLED
    assert broker.pending_here() == 0


@pytest.mark.anyio
async def test_cancel_cancels_the_named_pending_questions_only(broker: Broker) -> None:
    a1, a2 = question(run_id="stream_a"), question(run_id="stream_a")
    b = question(run_id="stream_b")
    t1, t2, tb = await start(broker, a1), await start(broker, a2), await start(broker, b)
    async with broker.events.bus.subscribe("stream_a") as on_a, broker.events.bus.subscribe("stream_b") as on_b:
        await broker.cancel([a1.id, a2.id])
        assert await finish(t1) == Resolution(a1.id, "cancelled", None)
        assert await finish(t2) == Resolution(a2.id, "cancelled", None)
        assert sorted(drain(on_a), key=repr) == sorted(
            [ElicitationResolved(a1.id, "cancelled"), ElicitationResolved(a2.id, "cancelled")], key=repr
        )
        assert drain(on_b) == []
    assert await state_of(broker.store, a1.id) is State.CANCELLED
    assert await state_of(broker.store, a2.id) is State.CANCELLED
    assert await state_of(broker.store, b.id) is State.PENDING
    assert not tb.done()
    await broker.cancel(["eli_unknown"])  # unknown ids are passed over
    assert await broker.respond(b.id, EU, "alice") == Resolution(b.id, "accepted", {"region": "eu"})
    assert (await finish(tb)).outcome == "accepted"


@pytest.mark.anyio
async def test_expire_due_expires_stored_pending_questions_past_their_deadline(broker: Broker) -> None:
    due = question(timeout_s=-5)
    not_due = question(timeout_s=60)
    answered = question(timeout_s=-5)
    for e in (due, not_due, answered):
        await broker.store.put(e)
    assert await broker.store.transition(answered.id, State.DECLINED, Answer("decline"), utcnow())

    async with broker.events.bus.subscribe(due.run_id) as queue:
        assert await broker.expire_due() == 1
        assert drain(queue) == [ElicitationResolved(due.id, "expired")]
    assert await state_of(broker.store, due.id) is State.EXPIRED
    assert await state_of(broker.store, not_due.id) is State.PENDING
    assert await state_of(broker.store, answered.id) is State.DECLINED
    assert await broker.expire_due() == 0
    with pytest.raises(Expired):
        await broker.respond(due.id, EU, "alice")


@pytest.mark.anyio
async def test_pending_lists_every_open_question_however_far_its_deadline_and_none_that_ended(broker: Broker) -> None:
    soon, years_away, answered, overdue = question(), question(10 * 365 * 24 * 3600), question(), question(-5)
    for e in (soon, years_away, answered, overdue):
        await broker.store.put(e)
    await broker.respond(answered.id, EU, "alice")
    # Past its deadline but not swept yet, a question is still pending: the caller tells it apart.
    assert {e.id for e in await broker.pending(10)} == {soon.id, years_away.id, overdue.id}
    assert len(await broker.pending(2)) == 2


@pytest.mark.anyio
async def test_end_reports_the_existing_outcome_and_unknown_ids_are_not_found(broker: Broker) -> None:
    e = question()
    await broker.store.put(e)
    await broker.respond(e.id, Answer("decline"), "alice")
    assert await broker.end(e.id, State.EXPIRED) == Resolution(e.id, "declined", None)
    assert await state_of(broker.store, e.id) is State.DECLINED
    with pytest.raises(NotFound):
        await broker.end("eli_missing", State.CANCELLED)


@pytest.mark.anyio
async def test_purge_forgets_old_resolved_questions_only(broker: Broker) -> None:
    old, recent, pending = question(), question(), question()
    for e in (old, recent, pending):
        await broker.store.put(e)
    assert await broker.store.transition(old.id, State.DECLINED, Answer("decline"), utcnow() - timedelta(hours=2))
    await broker.respond(recent.id, EU, "alice")

    assert await broker.purge(timedelta(hours=1)) == 1
    assert await broker.store.get(old.id) is None
    with pytest.raises(NotFound):
        await broker.respond(old.id, Answer("decline"), "alice")
    assert await state_of(broker.store, recent.id) is State.ACCEPTED
    assert await state_of(broker.store, pending.id) is State.PENDING
    assert await broker.purge(timedelta(hours=1)) == 0


@pytest.mark.anyio
async def test_questions_opened_together_end_each_on_its_own(broker: Broker) -> None:
    first, second = question(run_id="stream_all"), question(run_id="stream_all", timeout_s=0.2)
    async with broker.events.bus.subscribe("stream_all") as queue:
        await broker.open(first)
        await broker.open(second)
        assert [await queue.get(), await queue.get()] == [ElicitationRequested(first), ElicitationRequested(second)]
        task = asyncio.create_task(broker.wait_all([first.id, second.id]))
        await broker.respond(first.id, EU, "alice")
        with anyio.fail_after(DEADLINE_S):
            results = await task
    assert results == [Resolution(first.id, "accepted", {"region": "eu"}), Resolution(second.id, "expired", None)]


@pytest.mark.anyio
async def test_questions_show_only_once_the_write_along_with_them_is_stored(broker: Broker) -> None:
    first, second = question(run_id="stream_along"), question(run_id="stream_along")
    written: list[str] = []

    async def pause(fails: bool) -> None:
        await asyncio.sleep(0)  # stored a turn later than the questions
        if fails:
            raise OSError("the run's store is down")
        written.append("pause")

    async with broker.events.bus.subscribe("stream_along") as queue:
        with pytest.raises(OSError):
            await broker.open(first, along=pause(fails=True))
        assert drain(queue) == []  # stored, but never shown: nothing names it
        await broker.open(second, along=pause(fails=False))
        assert written == ["pause"]
        assert drain(queue) == [ElicitationRequested(second)]
    assert await state_of(broker.store, second.id) is State.PENDING


@pytest.mark.anyio
async def test_fifty_concurrent_different_answers_exactly_one_wins(broker: Broker) -> None:
    e = question()
    async with asked(broker, e) as (task, queue):
        answers = [Answer("accept", {"region": "eu", "replicas": n}) for n in range(1, 51)]
        with anyio.fail_after(10):
            results = await asyncio.gather(
                *(broker.respond(e.id, answer, "alice") for answer in answers), return_exceptions=True
            )
        wins = [r for r in results if isinstance(r, Resolution)]
        losses = [r for r in results if isinstance(r, AlreadyResolved)]
        assert len(wins) == 1
        assert len(losses) == 49
        winner = wins[0]
        assert winner.outcome == "accepted"
        assert await finish(task) == winner
        stored = await broker.store.get(e.id)
        assert stored is not None and stored.state is State.ACCEPTED
        assert stored.answer is not None and stored.answer.content == winner.content
        assert answers[results.index(winner)].content == winner.content
        assert drain(queue) == [ElicitationResolved(e.id, "accepted")]


@pytest.mark.anyio
async def test_fifty_concurrent_identical_answers_all_succeed(broker: Broker) -> None:
    e = question()
    task = await start(broker, e)
    with anyio.fail_after(10):
        results = await asyncio.gather(*(broker.respond(e.id, Answer("decline"), "alice") for _ in range(50)))
    assert set(results) == {Resolution(e.id, "declined", None)}
    assert await finish(task) == Resolution(e.id, "declined", None)


@pytest.mark.anyio
@pytest.mark.parametrize("offset_ms", [-4, -2, -1, 0, 1, 2, 4])
async def test_respond_racing_expiry_at_the_deadline_ends_in_exactly_one_state(broker: Broker, offset_ms: int) -> None:
    e = question(timeout_s=0.05)
    async with asked(broker, e) as (task, queue):
        delay = (e.expires_at - utcnow()).total_seconds() + offset_ms / 1000
        await asyncio.sleep(max(delay, 0))
        answered, swept = await asyncio.gather(
            broker.respond(e.id, EU, "alice"), broker.expire_due(), return_exceptions=True
        )
        waited = await finish(task)

        stored = await broker.store.get(e.id)
        assert stored is not None
        assert waited.outcome == stored.outcome
        if isinstance(answered, Resolution):
            assert answered == waited == Resolution(e.id, "accepted", {"region": "eu"})
            assert swept == 0
        else:
            assert isinstance(answered, Expired)
            assert waited == Resolution(e.id, "expired", None)
        resolved_events = [event for event in drain(queue) if isinstance(event, ElicitationResolved)]
        assert resolved_events == [ElicitationResolved(e.id, waited.outcome)]


class StaleReadStore(MemoryElicitations):
    """A MemoryElicitations that can hand out one snapshot taken before a concurrent writer committed."""

    def __init__(self) -> None:
        super().__init__()
        self.stale: dict[str, Elicitation] = {}

    async def get(self, elicitation_id: str) -> Elicitation | None:
        if elicitation_id in self.stale:
            return self.stale.pop(elicitation_id)
        return await super().get(elicitation_id)


@pytest.mark.anyio
async def test_late_answer_that_lost_to_an_earlier_answer_is_judged_against_the_winner() -> None:
    # Interleaving: answer A is read before the deadline; the deadline passes; answer B (the same answer, e.g. a
    # client retry) reads the still-pending row; A's compare-and-set commits; B decides Expire. The elicitation
    # ended accepted, so B must get the idempotent 200 outcome, not 410 "expired; the tool call was not completed".
    store = StaleReadStore()
    broker = Broker(store, BusSink())
    e = question(timeout_s=-1)
    await store.put(e)
    store.stale[e.id] = e  # what B read
    assert await store.transition(e.id, State.ACCEPTED, EU, e.expires_at - timedelta(milliseconds=1))  # A commits
    assert await broker.respond(e.id, EU, "alice") == Resolution(e.id, "accepted", {"region": "eu"})


@pytest.mark.anyio
@pytest.mark.parametrize("durable", [False, True])
async def test_a_run_going_away_cancels_what_it_waited_on_unless_the_hub_is_durable(
    store: Store, durable: bool
) -> None:
    broker = Broker(store, BusSink(), durable=durable)
    e = question()
    await broker.open(e)
    task = asyncio.create_task(broker.wait_all([e.id]))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await state_of(store, e.id) is (State.PENDING if durable else State.CANCELLED)


async def joined(broker: Broker, elicitation_id: str, waiters: int) -> None:
    """Until `waiters` wait here for the question."""
    await until(lambda: broker.waiters(elicitation_id) >= waiters)


@pytest.mark.anyio
async def test_every_waiter_of_one_question_wakes_once_with_the_same_resolution(broker: Broker) -> None:
    e = question()
    async with asked(broker, e) as (run, queue):
        relays = [asyncio.create_task(broker.wait(e.id)) for _ in range(2)]
        await joined(broker, e.id, 3)

        answer = Answer("accept", {"region": "us"})
        taken = await broker.respond(e.id, answer, "alice", "conv_1")

        assert [await finish(t) for t in (run, *relays)] == [taken] * 3
        assert drain(queue) == [ElicitationResolved(e.id, "accepted")]  # announced once, not once per waiter
    assert broker.pending_here() == 0 and broker.waiters(e.id) == 0


@pytest.mark.anyio
async def test_a_waiter_that_gives_up_leaves_the_others_waiting(broker: Broker) -> None:
    e = question()
    run = await start(broker, e)
    relay = asyncio.create_task(broker.wait(e.id))
    await joined(broker, e.id, 2)

    relay.cancel()
    with pytest.raises(asyncio.CancelledError):
        await relay
    assert broker.waiters(e.id) == 1 and not run.done()
    assert await state_of(broker.store, e.id) is State.PENDING  # a relay going away cancels nothing

    await broker.respond(e.id, EU, "alice", "conv_1")
    assert (await finish(run)).outcome == "accepted"


@pytest.mark.anyio
async def test_a_waiter_joining_after_the_end_gets_the_stored_resolution(broker: Broker) -> None:
    e = question()
    run = await start(broker, e)
    await broker.respond(e.id, Answer("decline"), "alice", "conv_1")
    assert (await finish(run)).outcome == "declined"
    assert await broker.wait(e.id) == Resolution(e.id, "declined")


@pytest.mark.anyio
async def test_the_run_and_a_relay_both_wake_when_the_question_expires(broker: Broker) -> None:
    e = question(timeout_s=0.2)
    run = await start(broker, e)
    relay = asyncio.create_task(broker.wait(e.id))
    assert (await finish(run)).outcome == "expired"
    assert (await finish(relay)).outcome == "expired"


class Tally:
    """The hub's metrics as the broker tells them (core/ports.py `Counts`)."""

    def __init__(self) -> None:
        self.waited_on: dict[str, int] = {}
        self.ends: list[tuple[str, str]] = []

    def pending(self, elicitation: Elicitation, change: int) -> None:
        self.waited_on[elicitation.id] = self.waited_on.get(elicitation.id, 0) + change

    def ended(self, elicitation: Elicitation, outcome: str) -> None:
        self.ends.append((elicitation.id, outcome))


@pytest.mark.anyio
async def test_a_question_is_pending_from_before_it_shows_until_it_ends_and_its_end_is_counted_once(
    store: Store,
) -> None:
    tally = Tally()
    pending_when_shown: list[int] = []

    class Shows:
        async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
            if isinstance(event, ElicitationRequested):
                pending_when_shown.append(tally.waited_on.get(elicitation.id, 0))

    broker = Broker(store, Shows(), counts=tally)
    e = question()
    await broker.open(e)
    assert pending_when_shown == [1]
    task = asyncio.create_task(broker.wait_all([e.id], known={e.id: e}))
    await broker.respond(e.id, EU, "alice")
    await finish(task)
    await broker.respond(e.id, EU, "alice")  # the same answer again: no second end
    assert tally.waited_on == {e.id: 0}
    assert tally.ends == [(e.id, "accepted")]


@pytest.mark.anyio
async def test_an_end_made_by_the_sweep_is_counted_and_a_question_nobody_waits_on_is_not_pending(
    broker: Broker,
) -> None:
    tally = Tally()
    sweeper = Broker(broker.store, BusSink(), counts=tally)
    due = question(timeout_s=-5)
    await broker.store.put(due)
    assert await sweeper.expire_due() == 1
    assert tally.ends == [(due.id, "expired")]
    assert tally.waited_on == {}


@pytest.mark.anyio
async def test_a_run_going_away_stops_counting_its_question_pending_without_an_end(store: Store) -> None:
    tally = Tally()
    broker = Broker(store, BusSink(), durable=True, counts=tally)
    e = question()
    await broker.open(e)
    task = asyncio.create_task(broker.wait_all([e.id], known={e.id: e}))
    await joined(broker, e.id, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tally.waited_on == {e.id: 0}
    assert tally.ends == []
    assert await state_of(store, e.id) is State.PENDING
