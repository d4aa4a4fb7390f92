"""The SQLite backend's runs: one row each, taken over by compare-and-set on the owner; the conversation's
messages a run started from are read from the conversation's own."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from elicithub.core.runs import Message, RunRecord, conversation_key
from elicithub.store.sqlite.conversations import commit, read_messages
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.steps import PURGE_BATCH, history_of, run_without_reading


class SqliteRuns:
    """Runs of one hub process: any owner but the current one is gone (a restart), so nobody else is alive."""

    def __init__(self, db: SqliteDb) -> None:
        self._run = db.run

    async def save(self, record: RunRecord) -> None:
        await self._run(lambda db: _save(db, record))

    async def finish(self, record: RunRecord) -> int | None:
        def finish(db: sqlite3.Connection) -> int | None:
            _save(db, record)
            return commit(db, record)

        return await self._run(finish)

    async def get(self, run_id: str, *, messages: bool = True, known: Sequence[Message] = ()) -> RunRecord | None:
        def read(db: sqlite3.Connection) -> RunRecord | None:
            row = db.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            data = json.loads(row[0])
            if (run := run_without_reading(data, messages=messages, known=known)) is not None:
                return run
            key = conversation_key(data["user_id"], data["conversation_id"])
            return RunRecord.from_json(data, read_messages(db, key, history_of(data)))

        return await self._run(read)

    async def claim(self, run_id: str, expected_owner: str, owner: str) -> bool:
        def cas(db: sqlite3.Connection) -> bool:
            row = db.execute(
                "SELECT data FROM runs WHERE run_id = ? AND owner = ?", (run_id, expected_owner)
            ).fetchone()
            if row is None:
                return False
            data = {**json.loads(row[0]), "owner": owner}
            db.execute("UPDATE runs SET owner = ?, data = ? WHERE run_id = ?", (owner, json.dumps(data), run_id))
            return True

        return await self._run(cas)

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        def read(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "SELECT data FROM runs WHERE status IN ('running', 'paused') AND owner != ? LIMIT ?",
                (other_than, limit),
            ).fetchall()

        return [RunRecord.from_json(json.loads(row[0]), messages=False) for row in await self._run(read)]

    async def purge(self, finished_before: float) -> int:
        def delete(db: sqlite3.Connection) -> int:
            cursor = db.execute(
                "DELETE FROM runs WHERE run_id IN "
                "(SELECT run_id FROM runs WHERE status = 'finished' AND updated_at < ? LIMIT ?)",
                (finished_before, PURGE_BATCH),
            )
            return cursor.rowcount

        return await self._run(delete)

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        return None

    async def alive(self, owner: str) -> bool:
        return False


def _save(db: sqlite3.Connection, record: RunRecord) -> None:
    row = (record.run_id, record.status, record.owner, record.updated_at, json.dumps(record.to_json()))
    db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?)", row)
