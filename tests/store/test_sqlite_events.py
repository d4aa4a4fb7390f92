"""The SQLite event log's memory of the newest events agrees with the file, whichever one a read is served from."""

from __future__ import annotations

from pathlib import Path

import pytest

from elicithub.core.runs import ConversationRecord
from elicithub.store.sqlite import SqliteBackend
from elicithub.store.sqlite.events import KEPT_PER_CONVERSATION

pytestmark = pytest.mark.anyio


async def test_reads_from_before_what_memory_keeps_come_from_the_file_complete(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "hub.db")
    try:
        n = KEPT_PER_CONVERSATION + 44
        for i in range(n):
            assert await backend.events.append("u:alice/c1", {"i": i}) == i + 1
        assert [data["i"] for _, data in await backend.events.read("u:alice/c1", after=10)] == list(range(10, n))
        assert [seq for seq, _ in await backend.events.read("u:alice/c1", after=n - 3)] == [n - 2, n - 1, n]
        assert await backend.events.read("u:alice/c1", after=n) == []
        assert await backend.events.read("u:bob/c1") == []  # another person's conversation of the same name
    finally:
        await backend.close()


async def test_a_new_process_continues_the_numbering_and_reads_what_the_last_one_wrote(tmp_path: Path) -> None:
    first = SqliteBackend(tmp_path / "hub.db")
    for i in range(3):
        await first.events.append("k", {"i": i})
    await first.close()
    second = SqliteBackend(tmp_path / "hub.db")
    try:
        assert await second.events.last("k") == 3
        assert [data["i"] for _, data in await second.events.read("k")] == [0, 1, 2]
        assert await second.events.append("k", {"i": 3}) == 4
        assert [seq for seq, _ in await second.events.read("k", after=2)] == [3, 4]
    finally:
        await second.close()


async def test_a_purged_conversation_starts_its_log_again(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "hub.db")
    try:
        await backend.conversations.put(ConversationRecord("k", "c1", None, updated_at=1.0), None)
        await backend.events.append("k", {"i": 0})
        assert await backend.conversations.purge(idle_before=2.0) == 1
        assert await backend.events.read("k") == []
        assert await backend.events.last("k") == 0
        assert await backend.events.append("k", {"i": 1}) == 1
    finally:
        await backend.close()
