"""SQLite on the loop: one failing write in a batch fails alone, nothing is lost on close, purges are bounded."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from elicithub.core.elicitation import State
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.sqlite.elicitations import SqliteElicitations
from elicithub.store.steps import PURGE_BATCH
from tests.store.test_stores import NOW, make

pytestmark = pytest.mark.anyio

SCHEMA = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER NOT NULL);"


def insert(k: str, v: int) -> object:
    return lambda db: db.execute("INSERT INTO t VALUES (?, ?)", (k, v)).rowcount


async def test_a_failing_write_in_a_batch_fails_alone_and_the_others_commit(tmp_path: Path) -> None:
    db = SqliteDb(tmp_path / "t.db", SCHEMA)
    try:
        results = await asyncio.gather(
            db.run(insert("a", 1)),
            db.run(
                lambda c: (c.execute("INSERT INTO t VALUES ('half', 0)"), c.execute("INSERT INTO t VALUES ('a', 9)"))
            ),
            db.run(insert("b", 2)),
            return_exceptions=True,
        )
        assert results[0] == 1 and results[2] == 1
        assert isinstance(results[1], sqlite3.IntegrityError)
        rows = await db.run(lambda c: c.execute("SELECT k, v FROM t ORDER BY k").fetchall())
        assert rows == [("a", 1), ("b", 2)]  # none of the failing write's statements stayed
    finally:
        await db.close()


async def test_writes_are_on_disk_for_the_next_process_after_close(tmp_path: Path) -> None:
    db = SqliteDb(tmp_path / "t.db", SCHEMA)
    await asyncio.gather(*(db.run(insert(f"k{i}", i)) for i in range(200)))
    await db.close()
    with pytest.raises(sqlite3.ProgrammingError):
        await db.run(insert("late", 0))
    again = sqlite3.connect(tmp_path / "t.db")
    try:
        assert again.execute("SELECT COUNT(*), SUM(v) FROM t").fetchone() == (200, sum(range(200)))
    finally:
        again.close()


async def test_a_purge_deletes_a_bounded_batch_and_the_next_ones_the_rest(tmp_path: Path) -> None:
    store = SqliteElicitations(tmp_path / "hub.db")
    try:
        old = [make() for _ in range(PURGE_BATCH + 5)]
        await asyncio.gather(*(store.put(e) for e in old))
        for e in old:
            assert await store.transition(e.id, State.CANCELLED, None, NOW - timedelta(hours=2))
        kept = make()
        await store.put(kept)
        assert await store.purge(NOW - timedelta(hours=1)) == PURGE_BATCH
        assert await store.purge(NOW - timedelta(hours=1)) == 5
        assert await store.purge(NOW - timedelta(hours=1)) == 0
        assert await store.get(old[0].id) is None and await store.get(kept.id) == kept
    finally:
        await store.close()
