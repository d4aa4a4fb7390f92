"""Every backend's lists of expiring entries: many writers add to one at once, and it reads a page at a time."""

from __future__ import annotations

import asyncio

import pytest

from elicithub.core.ports import Backend, Entry, KeyValueStore
from elicithub.store import open_backend

pytestmark = pytest.mark.anyio

DAY_S = 24 * 3600


async def values(kv: KeyValueStore, key: str) -> list[str]:
    return [entry.value for entry in await kv.entries(key, 1000)]


async def test_entries_added_at_once_are_all_kept(backend: Backend) -> None:
    kv = backend.kv
    await asyncio.gather(
        *(kv.add_entry("list:alice", f"task_{n}", DAY_S) for n in range(50)),
        *(kv.add_entry("list:bob", f"task_b{n}", DAY_S) for n in range(5)),
    )
    assert sorted(await values(kv, "list:alice")) == sorted(f"task_{n}" for n in range(50))
    assert sorted(await values(kv, "list:bob")) == sorted(f"task_b{n}" for n in range(5))
    assert await kv.entries("list:carol", 10) == []


async def test_entries_added_at_once_by_two_hubs_are_all_kept(shared_url: str) -> None:
    one, two = open_backend(shared_url), open_backend(shared_url)
    try:
        await asyncio.gather(*((one, two)[n % 2].kv.add_entry("list:alice", f"task_{n}", DAY_S) for n in range(40)))
        assert sorted(await values(two.kv, "list:alice")) == sorted(f"task_{n}" for n in range(40))
    finally:
        await one.close()
        await two.close()


async def test_entries_read_latest_first_a_page_at_a_time(backend: Backend) -> None:
    kv = backend.kv
    for n in range(10):  # each lives longer than the one before: they read in the opposite order
        await kv.add_entry("list:alice", f"task_{n}", DAY_S + n * 60)
    pages: list[list[Entry]] = []
    before = None
    while page := await kv.entries("list:alice", 3, before):
        pages.append(page)
        before = page[-1]
    assert [len(page) for page in pages] == [3, 3, 3, 1]
    read = [entry for page in pages for entry in page]
    assert [entry.value for entry in read] == [f"task_{n}" for n in reversed(range(10))]
    assert read == sorted(read, reverse=True)


async def test_a_page_bounded_by_an_entry_no_longer_kept_reads_on_from_where_it_was(backend: Backend) -> None:
    kv = backend.kv
    for n in range(4):
        await kv.add_entry("list:alice", f"task_{n}", DAY_S + n * 60)
    [newest, second, *_] = await kv.entries("list:alice", 10)
    gone = Entry((newest.expires_ms + second.expires_ms) // 2, "task_gone")
    assert [entry.value for entry in await kv.entries("list:alice", 10, gone)] == ["task_2", "task_1", "task_0"]


async def test_an_entry_whose_lifetime_is_over_is_not_read(backend: Backend) -> None:
    kv = backend.kv
    await kv.add_entry("list:alice", "task_old", -60)  # over a minute ago: clocks may step back a little
    await kv.add_entry("list:alice", "task_new", DAY_S)
    await kv.add_entry("list:bob", "task_old", -60)
    assert await values(kv, "list:alice") == ["task_new"]
    assert await values(kv, "list:bob") == []


async def test_lists_are_apart_from_the_values_put_under_the_same_key(backend: Backend) -> None:
    kv = backend.kv
    await kv.put("mcp-tasks:alice", b"[]", DAY_S)
    await kv.add_entry("mcp-tasks:alice", "task_1", DAY_S)
    assert await kv.get("mcp-tasks:alice") == b"[]"
    assert await values(kv, "mcp-tasks:alice") == ["task_1"]
    await kv.delete("mcp-tasks:alice")
    assert await values(kv, "mcp-tasks:alice") == ["task_1"]


async def test_a_set_holds_up_to_its_limit_and_a_member_held_again_whatever_the_limit(backend: Backend) -> None:
    kv = backend.kv
    first = await kv.hold("limits:runs:alice", "run_1", 60, limit=2)
    second = await kv.hold("limits:runs:alice", "run_2", 120, limit=2)
    refused = await kv.hold("limits:runs:alice", "run_3", 60, limit=2)
    again = await kv.hold("limits:runs:alice", "run_1", 60, limit=2)
    assert (first.taken, first.members) == (True, 1)
    assert (second.taken, second.members) == (True, 2)
    assert (refused.taken, refused.members) == (False, 2)
    assert (again.taken, again.members) == (True, 2)
    assert refused.first_end_ms == first.first_end_ms  # run_1 lapses first, and then run_2
    assert second.first_end_ms == first.first_end_ms < second.first_end_ms + 60_000
    assert (await kv.holding("limits:runs:bob")) == (False, 0, 0)
    assert (await kv.hold("limits:runs:bob", "run_4", 60, limit=2)).taken  # each set counts its own


async def test_a_released_member_makes_room_and_a_lapsed_one_is_not_counted(backend: Backend) -> None:
    kv = backend.kv
    await kv.hold("limits:runs:alice", "run_old", -60)  # lapsed a minute ago: clocks may step back a little
    await kv.hold("limits:runs:alice", "run_1", DAY_S, limit=2)
    await kv.hold("limits:runs:alice", "run_2", DAY_S, limit=2)
    assert (await kv.holding("limits:runs:alice")).members == 2
    assert not (await kv.hold("limits:runs:alice", "run_3", DAY_S, limit=2)).taken
    await kv.release("limits:runs:alice", "run_1")
    await kv.release("limits:runs:alice", "run_unknown")
    assert (await kv.hold("limits:runs:alice", "run_3", DAY_S, limit=2)).taken
    unlimited = await kv.hold("limits:runs:alice", "run_4", DAY_S)
    assert (unlimited.taken, unlimited.members) == (True, 3)


async def test_sets_are_apart_from_lists_and_values_under_the_same_key(backend: Backend) -> None:
    kv = backend.kv
    await kv.put("limits:x", b"v", DAY_S)
    await kv.add_entry("limits:x", "entry", DAY_S)
    await kv.hold("limits:x", "member", DAY_S)
    assert await kv.get("limits:x") == b"v"
    assert await values(kv, "limits:x") == ["entry"]
    assert (await kv.holding("limits:x")).members == 1


async def test_hubs_holding_at_once_take_no_more_than_the_limit(shared_url: str) -> None:
    one, two = open_backend(shared_url), open_backend(shared_url)
    try:
        held = await asyncio.gather(
            *((one, two)[n % 2].kv.hold("limits:runs:alice", f"run_{n}", DAY_S, limit=5) for n in range(40))
        )
        assert sum(h.taken for h in held) == 5
        assert (await one.kv.holding("limits:runs:alice")).members == 5
    finally:
        await one.close()
        await two.close()
