"""Every backend keeps every record kind: conversations by compare-and-set, and bounded event logs readers wait on."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import anyio
import pytest

from elicithub.core.ports import Backend
from elicithub.core.runs import ConversationRecord
from elicithub.store import open_backend
from tests.core_fixtures import DEADLINE_S

pytestmark = pytest.mark.anyio


def conversation(key: str = "u:alice/chat-1", version: int = 1, **changes: object) -> ConversationRecord:
    record = ConversationRecord(key, "chat-1", "alice", [{"role": "user", "content": "hi"}], version=version)
    return replace(record, **{"updated_at": 1000.0, **changes})  # type: ignore[arg-type]


async def test_a_conversation_is_inserted_once_then_written_by_compare_and_set(backend: Backend) -> None:
    store = backend.conversations
    assert await store.get("u:alice/chat-1") is None
    assert await store.put(conversation(), None)
    assert not await store.put(conversation(messages=[]), None)  # already there
    assert await store.get("u:alice/chat-1") == conversation()

    results: list[bool] = []

    async def write(i: int) -> None:
        results.append(await store.put(conversation(version=2, active_run_id=f"run_{i}"), 1))

    async with anyio.create_task_group() as group:
        for i in range(10):
            group.start_soon(write, i)
    assert results.count(True) == 1
    stored = await store.get("u:alice/chat-1")
    assert stored is not None and stored.version == 2 and stored.active_run_id is not None
    assert not await store.put(conversation(version=3), 1)  # a stale writer loses


async def test_idle_conversations_are_purged_unless_a_run_is_active(backend: Backend) -> None:
    store = backend.conversations
    await store.put(conversation("u:alice/idle", updated_at=100.0), None)
    await store.put(conversation("u:alice/busy", updated_at=100.0, active_run_id="run_1"), None)
    await backend.events.append("u:alice/idle", {"type": "text", "text": "x"})
    purged = await store.purge(idle_before=200.0)
    if backend.url.startswith("redis://"):
        assert purged == 0  # Redis expires idle conversations by their TTL instead
        return
    assert purged == 1
    assert await store.get("u:alice/idle") is None and await store.get("u:alice/busy") is not None
    assert await backend.events.read("u:alice/idle") == []


async def test_event_logs_number_from_one_and_read_after_a_position(backend: Backend) -> None:
    log = backend.events
    assert await log.last("k") == 0
    seqs = [await log.append("k", {"n": i}) for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    assert await log.append("other", {"n": 0}) == 1  # numbered per key
    assert await log.read("k", after=3) == [(4, {"n": 3}), (5, {"n": 4})]
    assert [seq for seq, _ in await log.read("k")] == [1, 2, 3, 4, 5]
    assert await log.last("k") == 5


async def test_event_logs_keep_about_their_newest_entries(backend: Backend) -> None:
    log = backend.events  # the fixture's backends keep about 100 per key
    for i in range(400):
        await log.append("k", {"n": i})
    kept = await log.read("k", limit=1000)
    assert kept[-1] == (400, {"n": 399})
    assert 100 <= len(kept) < 300
    assert [seq for seq, _ in kept] == list(range(401 - len(kept), 401))


async def test_a_waiting_reader_wakes_on_an_append_and_times_out_without_one(backend: Backend) -> None:
    log = backend.events
    await log.append("k", {"n": 0})
    assert await log.wait("k", after=1, timeout_s=0.2) == []
    waiting = asyncio.create_task(log.wait("k", after=1, timeout_s=30))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await log.append("k", {"n": 1})
    with anyio.fail_after(DEADLINE_S):
        assert await waiting == [(2, {"n": 1})]


async def test_a_cancelled_wait_ends_at_once(backend: Backend) -> None:
    waiting = asyncio.create_task(backend.events.wait("k", after=0, timeout_s=30))
    await asyncio.sleep(0.1)
    waiting.cancel()
    with anyio.fail_after(3):
        with pytest.raises(asyncio.CancelledError):
            await waiting
    assert await backend.events.append("k", {"n": 0}) == 1  # and the backend still works


async def test_posted_events_are_numbered_in_order_with_appends_and_counted_at_once(backend: Backend) -> None:
    log = backend.events
    assert await log.append("k", {"n": 0}) == 1
    log.post("k", {"n": 1})
    log.post("k", {"n": 2})
    log.post("other", {"n": 0})
    assert await log.last("k") == 3  # the posts before it count, stored or not yet
    assert await log.append("k", {"n": 3}) == 4  # after the posts made before it
    log.post("k", {"n": 4}, followed=False)
    assert await log.last("k") == 5
    assert await log.read("k", after=1) == [(2, {"n": 1}), (3, {"n": 2}), (4, {"n": 3}), (5, {"n": 4})]
    assert await log.read("other") == [(1, {"n": 0})]


async def test_a_waiting_reader_wakes_on_a_post(backend: Backend) -> None:
    log = backend.events
    waiting = asyncio.create_task(log.wait("k", after=0, timeout_s=30))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    log.post("k", {"n": 0})
    with anyio.fail_after(DEADLINE_S):
        assert await waiting == [(1, {"n": 0})]


async def test_a_reader_on_one_hub_wakes_on_a_post_by_another(shared_url: str) -> None:
    one, other = open_backend(shared_url), open_backend(shared_url)
    try:
        waiting = asyncio.create_task(one.events.wait("k", after=0, timeout_s=30))
        await asyncio.sleep(0.1)
        other.events.post("k", {"n": 1}, followed=False)
        other.events.post("k", {"n": 2}, followed=False)
        with anyio.fail_after(DEADLINE_S):
            found = await waiting
            while len(found) < 2:
                found += await one.events.wait("k", after=found[-1][0], timeout_s=30)
        assert found == [(1, {"n": 1}), (2, {"n": 2})]
    finally:
        await one.close()
        await other.close()


async def test_a_reader_on_one_hub_wakes_on_an_append_by_another(shared_url: str) -> None:
    one, other = open_backend(shared_url), open_backend(shared_url)
    try:
        waiting = asyncio.create_task(one.events.wait("k", after=0, timeout_s=30))
        await asyncio.sleep(0.1)
        await other.events.append("k", {"from": "other"})
        with anyio.fail_after(DEADLINE_S):
            assert await waiting == [(1, {"from": "other"})]
        assert await one.conversations.put(conversation(), None)
        assert not await other.conversations.put(conversation(), None)
    finally:
        await one.close()
        await other.close()
