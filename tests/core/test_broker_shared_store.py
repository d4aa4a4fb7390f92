"""Two brokers sharing one store, as two hub processes do: an answer or a deadline taken by one wakes the other.

For Redis and Postgres each broker has its own client (its own connections); a memory or SQLite store lives in one
process, so there both brokers share the one store object.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, State, utcnow
from elicithub.core.events import ElicitationRequested, ElicitationResolved, StreamEvent
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import ElicitationStore as Store
from elicithub.core.waiting import Resolution
from elicithub.errors import AlreadyResolved, Expired, NotFound
from elicithub.store.postgres.elicitations import PostgresElicitations
from elicithub.store.redis.elicitations import RedisElicitations
from tests.core.test_broker import EU, drain, finish, state_of
from tests.core_fixtures import DEADLINE_S, BusSink, PostgresServer, RedisServer, question, until

pytestmark = pytest.mark.anyio


@dataclass
class Pair:
    here: Broker  # where the run waits
    there: Broker  # where the answer arrives
    subscriptions: AsyncExitStack


@pytest.fixture
async def pair(store: Store, request: pytest.FixtureRequest) -> AsyncIterator[Pair]:
    other = store
    if isinstance(store, RedisElicitations):
        other = RedisElicitations(request.getfixturevalue("redis_url"))
    elif isinstance(store, PostgresElicitations):
        other = PostgresElicitations(request.getfixturevalue("postgres_url"))
    here, there = Broker(store, BusSink()), Broker(other, BusSink())
    await here.start()
    await there.start()
    async with AsyncExitStack() as subscriptions:
        yield Pair(here, there, subscriptions)
    await here.close()
    await there.close()
    if other is not store:
        await other.close()


Waiting = tuple[asyncio.Task[Resolution], asyncio.Queue[StreamEvent], str]


async def wait_here(pair: Pair, **overrides: Any) -> Waiting:
    """Start a waiting request on `here`; returns its task, a subscription to its stream, and its id."""
    e = question(**overrides)
    queue = await pair.subscriptions.enter_async_context(pair.here.events.bus.subscribe(e.run_id))
    task = asyncio.create_task(pair.here.request(e))
    with anyio.fail_after(DEADLINE_S):
        assert await queue.get() == ElicitationRequested(e)
    return task, queue, e.id


async def test_an_answer_taken_by_the_other_broker_wakes_the_waiter_with_its_content(pair: Pair) -> None:
    task, queue, eid = await wait_here(pair)
    there_stream = await pair.there.lookup(eid, "alice")
    async with pair.there.events.bus.subscribe(there_stream.run_id) as there_queue:
        answer = Answer("accept", {"region": "us", "replicas": 2})
        taken = await pair.there.respond(eid, answer, "alice", "conv_1")
        assert taken == Resolution(eid, "accepted", {"region": "us", "replicas": 2})
        assert await finish(task) == taken
        # The stream is told once, where the run waits.
        assert drain(queue) == [ElicitationResolved(eid, "accepted")]
        assert drain(there_queue) == [ElicitationResolved(eid, "accepted")]  # nobody waits there: it says so itself
    # Either broker now judges repeats and conflicts against the stored outcome.
    assert await pair.here.respond(eid, answer, "alice") == taken
    with pytest.raises(AlreadyResolved):
        await pair.here.respond(eid, Answer("decline"), "alice")
    with pytest.raises(AlreadyResolved):
        await pair.there.respond(eid, EU, "alice")
    with pytest.raises(NotFound):
        await pair.there.respond(eid, answer, "bob")


async def test_the_waiting_process_announces_its_own_answer_once(pair: Pair) -> None:
    # The store's notice of a transition made here reaches this broker's listener too; it must not announce again.
    task, queue, eid = await wait_here(pair)
    assert (await pair.here.respond(eid, EU, "alice")).outcome == "accepted"
    assert (await finish(task)).outcome == "accepted"
    # Notices are handled in order: once a later one has woken a waiter here, the earlier one was handled too.
    later, later_queue, later_id = await wait_here(pair)
    await pair.there.respond(later_id, Answer("decline"), "alice")
    assert (await finish(later)).outcome == "declined"
    assert drain(queue) == [ElicitationResolved(eid, "accepted")]
    assert drain(later_queue) == [ElicitationResolved(later_id, "declined")]


async def test_a_question_opened_here_and_answered_there_before_anyone_waits_still_ends_the_wait(pair: Pair) -> None:
    # A wait for a question opened here reads it again only if a notice came since it was opened: either the
    # notice comes before the wait (then it reads) or after it (then the notice wakes it).
    for heard_first in (True, False):
        e = question()
        queue = await pair.subscriptions.enter_async_context(pair.here.events.bus.subscribe(e.run_id))
        await pair.here.open(e)
        assert await pair.there.respond(e.id, EU, "alice") == Resolution(e.id, "accepted", EU.content)
        if heard_first:  # the notice lets go of what was kept of it as opened here: nothing stays once it ended
            await until(lambda eid=e.id: eid not in pair.here._opened)
        with anyio.fail_after(DEADLINE_S):
            assert await pair.here.wait(e.id, e) == Resolution(e.id, "accepted", EU.content)
        # Announced where it was answered; here too (once) if the wait here learnt of it from a notice.
        assert drain(queue) in (
            [ElicitationRequested(e)],
            [ElicitationRequested(e), ElicitationResolved(e.id, "accepted")],
        )


async def test_a_cancel_taken_by_the_other_broker_reaches_the_waiter(pair: Pair) -> None:
    task, queue, eid = await wait_here(pair)
    assert await pair.there.end(eid, State.CANCELLED) == Resolution(eid, "cancelled", None)
    assert await finish(task) == Resolution(eid, "cancelled", None)
    assert drain(queue) == [ElicitationResolved(eid, "cancelled")]


async def test_the_other_brokers_sweep_expires_the_waiter_here(pair: Pair) -> None:
    task, queue, eid = await wait_here(pair, timeout_s=0.2)
    await asyncio.sleep(0.25)
    swept = await pair.there.expire_due()
    waited = await finish(task)
    assert waited == Resolution(eid, "expired", None)
    assert swept in (0, 1)  # the waiter's own deadline may have come first; either way it ended once
    assert drain(queue) == [ElicitationResolved(eid, "expired")]
    assert await state_of(pair.here.store, eid) is State.EXPIRED


@pytest.mark.parametrize("offset_ms", [-4, -1, 0, 1, 4])
async def test_answers_and_sweeps_on_both_brokers_racing_the_deadline_end_it_once(pair: Pair, offset_ms: int) -> None:
    task, queue, eid = await wait_here(pair, timeout_s=0.05)
    e = await pair.here.lookup(eid, "alice")
    await asyncio.sleep(max((e.expires_at - utcnow()).total_seconds() + offset_ms / 1000, 0))
    results = await asyncio.gather(
        pair.there.respond(eid, EU, "alice"),
        pair.here.respond(eid, EU, "alice"),
        pair.there.expire_due(),
        pair.here.expire_due(),
        return_exceptions=True,
    )
    waited = await finish(task)
    stored = await pair.there.store.get(eid)
    assert stored is not None and stored.outcome == waited.outcome
    answers, sweeps = results[:2], results[2:]
    if waited.outcome == "accepted":
        assert answers.count(Resolution(eid, "accepted", {"region": "eu"})) >= 1
        assert all(a == waited for a in answers) and sweeps == [0, 0]
    else:
        assert waited == Resolution(eid, "expired", None)
        assert all(isinstance(a, Expired) for a in answers)
    assert drain(queue) == [ElicitationResolved(eid, waited.outcome)]


@asynccontextmanager
async def declined_unheard(store: Store, writer: Store) -> AsyncIterator[tuple[asyncio.Task[Resolution], JsonObject]]:
    """A question waited for on a broker over `store`; yields the waiting task and the question declined as JSON,
    for the test to store without a notice. Then the waiter must still learn of it, announced once."""
    broker = Broker(store, BusSink())
    pair = Pair(broker, Broker(writer, BusSink()), AsyncExitStack())
    await broker.start()
    try:
        task, queue, eid = await wait_here(pair)
        e = await writer.get(eid)
        assert e is not None
        answered = e.to_json() | {"state": "declined", "answer": {"action": "decline", "content": None}}
        answered["resolved_at"] = utcnow().isoformat()
        yield task, answered
        assert await finish(task) == Resolution(eid, "declined", None)
        assert drain(queue) == [ElicitationResolved(eid, "declined")]
    finally:
        await pair.subscriptions.aclose()
        await broker.close()
        await store.close()
        await writer.close()


async def test_a_waiter_whose_notice_was_lost_catches_up_when_listening_starts_over(
    redis_server: RedisServer, redis_url: str
) -> None:
    # An answer stored while this broker's subscription was down (simulated: the JSON written without a notice),
    # then the subscription connection dies and redis-py subscribes again: the broker re-reads its waiters.
    async with declined_unheard(RedisElicitations(redis_url), RedisElicitations(redis_url)) as (task, answered):
        with redis_server.client() as client:
            client.set(f"elicithub:elicitation:{answered['id']}", json.dumps(answered))
            assert not task.done()
            assert client.client_kill_filter(_type="pubsub") >= 1


async def test_a_postgres_waiter_whose_notice_was_lost_catches_up_when_listening_starts_over(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    # An answer stored while this broker's listener was down (simulated: the row written without a NOTIFY), then
    # the listening connection is killed and the store listens again: the broker re-reads its waiters.
    stores = PostgresElicitations(postgres_url), PostgresElicitations(postgres_url)
    async with declined_unheard(*stores) as (task, answered):
        data, eid = json.dumps(answered).replace("'", "''"), answered["id"]
        postgres_server.psql(
            "elicithub", f"UPDATE elicithub_elicitations SET state = 'declined', data = '{data}' WHERE id = '{eid}'"
        )
        assert not task.done()
        assert postgres_server.kill_listeners() == 1


async def test_waiters_on_both_brokers_wake_when_either_takes_the_answer(pair: Pair) -> None:
    task, queue, eid = await wait_here(pair)
    relay_here = asyncio.create_task(pair.here.wait(eid))
    relay_there = asyncio.create_task(pair.there.wait(eid))
    await until(lambda: pair.here.waiters(eid) >= 2 and pair.there.waiters(eid) >= 1)

    taken = await pair.there.respond(eid, EU, "alice", "conv_1")

    assert [await finish(t) for t in (task, relay_here, relay_there)] == [taken] * 3
    assert drain(queue) == [ElicitationResolved(eid, "accepted")]


async def test_the_answer_to_a_question_opened_here_is_looked_up_without_a_read(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = question()
    await pair.here.open(e)
    reads: list[str] = []
    read = pair.here.store.get

    async def counted(elicitation_id: str) -> Any:
        reads.append(elicitation_id)
        return await read(elicitation_id)

    monkeypatch.setattr(pair.here.store, "get", counted)
    assert await pair.here.lookup(e.id, "alice", "conv_1") == e
    assert reads == []  # held here since it was opened
    # The same owner check as a read: to anyone else, or in another conversation, it does not exist.
    for user, conversation in (("bob", None), (None, None), ("alice", "conv_2")):
        with pytest.raises(NotFound):
            await pair.here.lookup(e.id, user, conversation)
    with pytest.raises(NotFound):
        await pair.here.lookup("eli_missing", "alice")
    # Another hub did not open it: it reads it.
    reads.clear()
    assert await pair.there.lookup(e.id, "alice") == e
    assert reads == ([e.id] if pair.there.store is pair.here.store else [])
    taken = await pair.here.respond(e.id, EU, "alice", "conv_1")
    assert taken == Resolution(e.id, "accepted", EU.content)
    # Answered twice: once it ended it is judged against what is stored, here and there.
    for broker in (pair.here, pair.there):
        assert await broker.respond(e.id, EU, "alice") == taken
        with pytest.raises(AlreadyResolved):
            await broker.respond(e.id, Answer("decline"), "alice")
        with pytest.raises(NotFound):
            await broker.respond(e.id, EU, "bob")


@pytest.mark.parametrize("content", [{"region": "us"}, {"region": 5}], ids=["valid", "invalid"])
async def test_an_answer_here_to_a_question_ended_there_since_it_was_opened_is_refused(
    pair: Pair, content: JsonObject
) -> None:
    # The copy held here is still pending when the other hub ends the question (its notice may not have come yet):
    # the answer is judged against what is stored, not accepted, nor refused for its content.
    e = question()
    await pair.here.open(e)
    held = await pair.here.lookup(e.id, "alice")
    assert await pair.there.respond(e.id, Answer("decline"), "alice") == Resolution(e.id, "declined")
    for looked_up in (held, None):
        with pytest.raises(AlreadyResolved):
            await pair.here.respond(e.id, Answer("accept", content), "alice", looked_up=looked_up)
    assert await state_of(pair.here.store, e.id) is State.DECLINED


async def test_an_answer_here_after_the_deadline_of_a_question_opened_here_expires_it(pair: Pair) -> None:
    e = question(timeout_s=-1)
    await pair.here.open(e)
    with pytest.raises(Expired):
        await pair.here.respond(e.id, EU, "alice")
    assert await state_of(pair.here.store, e.id) is State.EXPIRED
    for broker in (pair.here, pair.there):
        with pytest.raises(Expired):
            await broker.respond(e.id, EU, "alice")


async def test_a_run_resumed_on_another_hub_hears_the_end_of_the_question_it_shows_again(pair: Pair) -> None:
    # The question was opened here (then this hub went away, say); its run parks there and shows it again: the end
    # taken here (the hub that stored it) reaches the parked run there.
    e = question()
    await pair.here.open(e)
    ended: list[tuple[str, bool]] = []
    pair.there.park(e.id, lambda elicitation_id, here: ended.append((elicitation_id, here)))
    assert await pair.there.reopen(e.id) == e
    await pair.here.respond(e.id, EU, "alice")
    await until(lambda: ended == [(e.id, False)])
