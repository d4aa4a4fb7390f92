"""The Redis store against a real redis-server: several clients of one database, its keys, its notices, and the
eviction policy it needs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import anyio
import pytest
import redis

from elicithub.core.elicitation import Answer, State, utcnow
from elicithub.errors import StoreUnusable
from elicithub.store import open_backend
from elicithub.store.redis.elicitations import KEEP, PENDING, RESOLVED, RedisElicitations
from elicithub.store.redis.events import RedisEvents
from tests.core_fixtures import DEADLINE_S, RedisServer, until
from tests.store.test_stores import NOW, make

pytestmark = pytest.mark.anyio


@pytest.fixture
async def two(redis_url: str) -> AsyncIterator[tuple[RedisElicitations, RedisElicitations]]:
    """Two clients of one database, each with its own connections, as two hubs would have."""
    a, b = RedisElicitations(redis_url), RedisElicitations(redis_url)
    yield a, b
    await a.close()
    await b.close()


async def test_what_one_client_puts_the_other_reads(two: tuple[RedisElicitations, RedisElicitations]) -> None:
    a, b = two
    e = make()
    await a.put(e)
    assert await b.get(e.id) == e
    assert [found.id for found in await b.due(NOW + timedelta(hours=1))] == [e.id]


async def test_compare_and_set_across_two_clients_has_exactly_one_winner(
    two: tuple[RedisElicitations, RedisElicitations],
) -> None:
    a, b = two
    for _ in range(5):
        e = make()
        await a.put(e)
        attempts = [
            (store, State.ACCEPTED, Answer("accept", {"region": f"r{n}"})) for n, store in enumerate([a, b] * 10)
        ] + [(b, State.EXPIRED, None), (a, State.CANCELLED, Answer("cancel"))]
        results = await asyncio.gather(*(store.transition(e.id, s, answer, NOW) for store, s, answer in attempts))
        assert results.count(True) == 1
        _, state, answer = attempts[results.index(True)]
        for store in (a, b):
            stored = await store.get(e.id)
            assert stored is not None
            assert stored.state is state and stored.answer == answer and stored.resolved_at == NOW


async def test_a_transition_through_one_client_is_heard_by_the_other(
    two: tuple[RedisElicitations, RedisElicitations],
) -> None:
    a, b = two
    first, second = make(), make()
    await a.put(first)
    await a.put(second)
    async with contextlib.aclosing(a.resolutions()) as heard_by_a:
        with anyio.fail_after(DEADLINE_S):
            assert await anext(heard_by_a) is None
            assert await b.transition(first.id, State.ACCEPTED, Answer("accept", {"region": "eu"}), NOW)
            assert await a.transition(first.id, State.DECLINED, Answer("decline"), NOW) is False
            assert await a.transition(second.id, State.DECLINED, Answer("decline"), NOW)
            assert [await anext(heard_by_a), await anext(heard_by_a)] == [first.id, second.id]


async def test_only_the_clients_that_wait_on_a_question_hear_its_end(
    two: tuple[RedisElicitations, RedisElicitations], redis_url: str
) -> None:
    # a stores the questions (so waits on them), c waits on one it did not store, b only answers: b's subscription
    # receives no message for them. Notices come in the order Redis published them, so a first message naming a
    # question ended after them shows that none came before it (counted, not timed).
    a, b = two
    c = RedisElicitations(redis_url)
    first, second, later = make(), make(), make()
    try:
        await a.put(first)
        await a.put(second)
        async with (
            contextlib.aclosing(a.resolutions()) as heard_by_a,
            contextlib.aclosing(b.resolutions()) as heard_by_b,
            contextlib.aclosing(c.resolutions()) as heard_by_c,
        ):
            with anyio.fail_after(DEADLINE_S):
                assert [await anext(heard_by_a), await anext(heard_by_b), await anext(heard_by_c)] == [None] * 3
                watched = await c.watch(first.id)
                assert watched is not None and watched.state is State.PENDING
                assert await b.transition(first.id, State.ACCEPTED, Answer("accept", {"region": "eu"}), NOW)
                assert await b.transition(second.id, State.DECLINED, Answer("decline"), NOW)
                assert [await anext(heard_by_a), await anext(heard_by_a)] == [first.id, second.id]
                assert await anext(heard_by_c) == first.id
                await b.put(later)  # now b waits on one
                assert await a.transition(later.id, State.EXPIRED, None, NOW)
                assert await anext(heard_by_b) == later.id  # its first message since it listens
                await c.watch(later.id)  # ended: no lease taken
                await c.put(third := make())
                assert await b.transition(third.id, State.EXPIRED, None, NOW)
                assert await anext(heard_by_c) == third.id  # nothing of `second` or `later` came before it
    finally:
        await c.close()


async def test_a_watch_reads_after_taking_the_lease_so_an_earlier_end_is_not_missed(
    redis_server: RedisServer, two: tuple[RedisElicitations, RedisElicitations]
) -> None:
    a, b = two
    e = make()
    await a.put(e)
    assert await b.transition(e.id, State.CANCELLED, Answer("cancel"), NOW)
    watched = await b.watch(e.id)  # b remembers the end it made; a reads it
    assert watched is not None and watched.state is State.CANCELLED
    ended = await a.watch(e.id)
    assert ended is not None and ended.state is State.CANCELLED and ended.answer == Answer("cancel")
    assert await a.watch("eli_missing") is None
    with redis_server.client() as client:
        assert client.keys("elicithub:waiters:*") == []  # neither an ended nor a missing question takes a lease


async def test_notices_stay_within_their_database(redis_server: RedisServer, redis_url: str) -> None:
    with redis_server.client(1) as client:
        client.flushdb()
    zero, one = RedisElicitations(redis_url), RedisElicitations(redis_server.url(1))
    try:
        in_zero, in_one = make(), make()
        await zero.put(in_zero)
        await one.put(in_one)
        assert await one.get(in_zero.id) is None
        async with contextlib.aclosing(one.resolutions()) as heard_in_one:
            with anyio.fail_after(DEADLINE_S):
                assert await anext(heard_in_one) is None
                assert await zero.transition(in_zero.id, State.EXPIRED, None, NOW)
                assert await one.transition(in_one.id, State.EXPIRED, None, NOW)
                assert await anext(heard_in_one) == in_one.id
    finally:
        await zero.close()
        await one.close()


async def test_a_transition_against_a_copy_held_since_another_client_ended_it_fails(
    two: tuple[RedisElicitations, RedisElicitations],
) -> None:
    # a holds the question as it stored it (never read back); b ends it; a's compare-and-set against its copy fails
    # and leaves b's outcome in place.
    a, b = two
    e = make()
    await a.put(e)
    assert await b.transition(e.id, State.DECLINED, Answer("decline"), NOW)
    assert await a.transition(e.id, State.ACCEPTED, Answer("accept", {"region": "eu"}), NOW, e) is False
    stored = await a.get(e.id)
    assert stored is not None and stored.state is State.DECLINED
    other = make()
    await a.put(other)
    assert await a.transition(other.id, State.ACCEPTED, Answer("accept", {"region": "eu"}), NOW, other)


async def test_after_a_lost_connection_notices_start_over_with_none(
    redis_server: RedisServer, two: tuple[RedisElicitations, RedisElicitations]
) -> None:
    a, b = two
    e = make()
    await a.put(e)
    async with contextlib.aclosing(a.resolutions()) as notices:
        with anyio.fail_after(10):
            assert await anext(notices) is None
            with redis_server.client() as admin:
                assert admin.client_kill_filter(_type="pubsub") >= 1
            # redis-py reconnects and subscribes again; what was published in between would be lost, so say so.
            assert await anext(notices) is None
            assert await b.transition(e.id, State.CANCELLED, Answer("cancel"), NOW)
            assert await anext(notices) == e.id


async def test_keys_are_namespaced_and_expire_as_a_safety_net(redis_server: RedisServer, redis_url: str) -> None:
    store = RedisElicitations(redis_url)
    try:
        pending, answered = make(), make()
        await store.put(pending)
        await store.put(answered)
        assert await store.transition(answered.id, State.ACCEPTED, Answer("accept", {}), NOW)
    finally:
        await store.close()
    with redis_server.client() as client:
        keys = set(client.keys("*"))
        # Each elicitation's own key; a pending one's lease (who hears its end) besides, gone once it ends.
        assert keys == {
            PENDING,
            RESOLVED,
            f"elicithub:elicitation:{pending.id}",
            f"elicithub:elicitation:{answered.id}",
            f"elicithub:waiters:{pending.id}",
        }
        assert client.zrange(PENDING, 0, -1) == [pending.id]
        assert client.zrange(RESOLVED, 0, -1) == [answered.id]
        for elicitation_id in (pending.id, answered.id):
            ttl = client.ttl(f"elicithub:elicitation:{elicitation_id}")
            assert 0 < ttl <= (KEEP + timedelta(minutes=10)).total_seconds() + 1  # its deadline, then KEEP
        # The lease expires with its elicitation's key (the same lifetime, set in the same transaction), so it cannot
        # lapse while the elicitation is stored.
        lease_at, question_at = (
            client.execute_command("PEXPIRETIME", f"elicithub:{kind}:{pending.id}")
            for kind in ("waiters", "elicitation")
        )
        assert 0 < question_at and abs(lease_at - question_at) < 1000


async def test_due_skips_and_forgets_an_elicitation_whose_key_expired(
    redis_server: RedisServer, redis_url: str
) -> None:
    store = RedisElicitations(redis_url)
    try:
        kept, dropped = make(timeout_s=-1), make(timeout_s=-1)
        await store.put(kept)
        await store.put(dropped)
        with redis_server.client() as client:
            client.delete(f"elicithub:elicitation:{dropped.id}")
            assert [e.id for e in await store.due(NOW)] == [kept.id]
            assert client.zrange(PENDING, 0, -1) == [kept.id]
    finally:
        await store.close()


async def test_purge_empties_the_resolved_set_in_batches(redis_server: RedisServer, redis_url: str) -> None:
    store = RedisElicitations(redis_url)
    try:
        # Expiring from the real clock: keys of questions long past their deadline get a one-second TTL, and 1203 of
        # them may not all be written and resolved within it.
        old = [make(timeout_s=(utcnow() - NOW + timedelta(minutes=10)).total_seconds()) for _ in range(1203)]
        async with anyio.create_task_group() as group:
            for e in old:
                group.start_soon(store.put, e)
        for e in old:
            assert await store.transition(e.id, State.EXPIRED, None, NOW - timedelta(hours=2))
        assert await store.purge(NOW - timedelta(hours=1)) == len(old)
        with redis_server.client() as client:
            assert client.keys("*") == []
    finally:
        await store.close()


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-ttl"])
async def test_a_redis_that_may_evict_keys_is_refused_unless_allowed(
    redis_server: RedisServer, redis_url: str, policy: str
) -> None:
    refused, allowed = open_backend(redis_url), open_backend(redis_url, allow_eviction=True)
    with redis_server.client() as client:
        client.config_set("maxmemory-policy", policy)
        try:
            with pytest.raises(StoreUnusable, match=f"may evict keys \\(maxmemory-policy is {policy}\\)"):
                await refused.open()
            await allowed.open()
        finally:
            client.config_set("maxmemory-policy", "noeviction")
            await refused.close()
            await allowed.close()
    safe = open_backend(redis_url)
    try:
        await safe.open()
    finally:
        await safe.close()


async def leased(redis_url: str, key: str) -> None:
    """Until a hub holds a lease on `key`'s log: its reader listens for other hubs' appends."""
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        await until(lambda: bool(client.hgetall(f"elicithub:watch:{key}")))


async def test_a_hub_following_its_own_log_also_gets_another_hubs_appends_in_order(redis_url: str) -> None:
    one, other = open_backend(redis_url), open_backend(redis_url)
    try:
        assert await one.events.append("k", {"n": 1}) == 1  # kept in one's memory
        waiting = asyncio.create_task(one.events.wait("k", after=1, timeout_s=30))
        await leased(redis_url, "k")  # the reader listens (an append before that is read by its first look)
        assert await other.events.append("k", {"n": 2}) == 2
        with anyio.fail_after(DEADLINE_S):
            assert await waiting == [(2, {"n": 2})]
        assert await one.events.append("k", {"n": 3}) == 3
        with anyio.fail_after(DEADLINE_S):
            assert await one.events.wait("k", after=2, timeout_s=30) == [(3, {"n": 3})]
        assert [seq for seq, _ in await one.events.read("k")] == [1, 2, 3]
        assert [seq for seq, _ in await other.events.read("k")] == [1, 2, 3]
        # Only the hub that reads the log holds a lease on it, so only it is told of the others' appends.
        with redis.Redis.from_url(redis_url, decode_responses=True) as client:
            assert len(client.hgetall("elicithub:watch:k")) == 1
    finally:
        await one.close()
        await other.close()


async def test_a_post_redis_refuses_is_logged_and_stored_once_redis_takes_it(redis_url: str) -> None:
    backend = open_backend(redis_url)
    failed = asyncio.Event()

    class Failures(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "storing" in record.getMessage():
                failed.set()

    handler = Failures()
    logging.getLogger("elicithub.store.write_behind").addHandler(handler)
    try:
        with redis.Redis.from_url(redis_url) as client:
            client.set("elicithub:events:k", "not a stream")  # every write of the log fails while this is there
            backend.events.post("k", {"n": 1})
            backend.events.post("k", {"n": 2})
            with anyio.fail_after(DEADLINE_S):
                await failed.wait()
            client.delete("elicithub:events:k")
        with anyio.fail_after(10):
            assert await backend.events.last("k") == 2  # once stored: nothing lost, nothing twice
        assert await backend.events.read("k") == [(1, {"n": 1}), (2, {"n": 2})]
    finally:
        logging.getLogger("elicithub.store.write_behind").removeHandler(handler)
        await backend.close()


async def test_a_batch_of_appends_sent_again_after_its_reply_was_lost_is_stored_once(redis_url: str) -> None:
    backend = open_backend(redis_url)
    events = backend.events
    assert isinstance(events, RedisEvents)
    try:
        # What the write-behind does when a batch's reply never came: the same batch, by its number, again.
        assert await events._write(7, [("k", {"n": 1}), ("k", {"n": 2})]) == [1, 2]
        assert await events._write(7, [("k", {"n": 1}), ("k", {"n": 2})]) == [1, 2]
        assert [seq for seq, _ in await open_backend(redis_url).events.read("k")] == [1, 2]
    finally:
        await backend.close()


async def test_the_hub_running_a_run_listens_to_its_log_and_a_hub_announcing_an_answer_does_not(
    redis_url: str,
) -> None:
    running, answering = open_backend(redis_url), open_backend(redis_url)
    try:
        waiting = asyncio.create_task(running.events.wait("k", after=0, timeout_s=30))
        await leased(redis_url, "k")
        with redis.Redis.from_url(redis_url, decode_responses=True) as client:
            assert len(client.hgetall("elicithub:watch:k")) == 1  # the reader's lease
            answering.events.post("k", {"n": 1}, followed=False)
            with anyio.fail_after(DEADLINE_S):
                assert await waiting == [(1, {"n": 1})]
            assert len(client.hgetall("elicithub:watch:k")) == 1  # still only the reader's
            running.events.post("other", {"n": 1})  # a run of its own: its lease is taken along
            assert await running.events.last("other") == 1
            assert len(client.hgetall("elicithub:watch:other")) == 1
    finally:
        await running.close()
        await answering.close()


async def test_a_list_of_entries_drops_its_expired_ones_as_it_grows_and_lives_as_long_as_its_longest(
    redis_server: RedisServer, redis_url: str
) -> None:
    backend = open_backend(redis_url)
    try:
        await backend.kv.add_entry("mcp-tasks:alice", "task_long", 120)
        await backend.kv.add_entry("mcp-tasks:alice", "task_over", -60)  # over already (a clock may step back)
        await backend.kv.add_entry("mcp-tasks:alice", "task_short", 60)
    finally:
        await backend.close()
    with redis_server.client() as client:
        members = client.zrange("elicithub:entries:mcp-tasks:alice", 0, -1)
        assert [member.split(":", 1)[1] for member in members] == ["task_short", "task_long"]
        assert 60_000 < client.pttl("elicithub:entries:mcp-tasks:alice") <= 120_000


async def test_a_log_redis_let_expire_is_not_served_from_a_hubs_memory_once_the_purge_passed_it(redis_url: str) -> None:
    backend = open_backend(redis_url)
    try:
        before = time.time()
        assert await backend.events.append("k", {"n": 1}) == 1  # kept in the hub's memory too
        with redis.Redis.from_url(redis_url) as client:
            client.delete("elicithub:events:k", "elicithub:events-seq:k")  # as its TTL does, retention_s after
        await backend.conversations.purge(idle_before=before)  # the sweep's, before the log went idle
        assert await backend.events.read("k") == [(1, {"n": 1})]  # still held here
        await backend.conversations.purge(idle_before=time.time())  # the log idle past retention
        assert await backend.events.read("k") == []
        assert await backend.events.append("k", {"n": 2}) == 1  # a conversation begun again under its key
        assert await backend.events.read("k") == [(1, {"n": 2})]
    finally:
        await backend.close()


async def test_a_log_that_redis_expired_and_a_new_run_started_again_reads_as_the_new_log(redis_url: str) -> None:
    # Redis forgets a conversation's log `retention_s` after its last append (deleted here, as the expiry would);
    # a conversation id used again then numbers from 1, and what this hub kept of the old log must not hide it.
    backend = open_backend(redis_url)
    try:
        assert [await backend.events.append("reused", {"old": n}) for n in range(3)] == [1, 2, 3]
        with redis.Redis.from_url(redis_url) as client:
            client.delete("elicithub:events:reused", "elicithub:events-seq:reused")
        assert await backend.events.append("reused", {"new": 1}) == 1
        assert await backend.events.read("reused") == [(1, {"new": 1})]
        assert await backend.events.last("reused") == 1
    finally:
        await backend.close()
