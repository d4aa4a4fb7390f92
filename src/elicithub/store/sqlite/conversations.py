"""The SQLite backend's conversations: written by compare-and-set on their version; a purge takes their events."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from elicithub.core.runs import ConversationRecord
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.sqlite.events import SqliteEvents
from elicithub.store.sqlite.schema import PURGE_BATCH


class SqliteConversations:
    def __init__(self, db: SqliteDb, events: SqliteEvents) -> None:
        self._run = db.run
        self._events = events

    async def get(self, key: str) -> ConversationRecord | None:
        def read(db: sqlite3.Connection) -> Any:
            return db.execute("SELECT data FROM conversations WHERE key = ?", (key,)).fetchone()

        row = await self._run(read)
        return None if row is None else ConversationRecord.from_json(json.loads(row[0]))

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        row = (
            record.version,
            int(record.active_run_id is not None),
            record.updated_at,
            json.dumps(record.to_json(), separators=(",", ":")),
            record.key,
        )

        def write(db: sqlite3.Connection) -> bool:
            if expected_version is None:
                cursor = db.execute(
                    "INSERT OR IGNORE INTO conversations (version, active, updated_at, data, key) "
                    "VALUES (?, ?, ?, ?, ?)",
                    row,
                )
            else:
                cursor = db.execute(
                    "UPDATE conversations SET version = ?, active = ?, updated_at = ?, data = ? "
                    "WHERE key = ? AND version = ?",
                    (*row, expected_version),
                )
            return cursor.rowcount == 1

        return await self._run(write)

    async def purge(self, idle_before: float) -> int:
        def delete(db: sqlite3.Connection) -> int:
            keys = [
                r[0]
                for r in db.execute(
                    "SELECT key FROM conversations WHERE active = 0 AND updated_at < ? LIMIT ?",
                    (idle_before, PURGE_BATCH),
                ).fetchall()
            ]
            for key in keys:
                db.execute("DELETE FROM conversations WHERE key = ?", (key,))
                db.execute("DELETE FROM events WHERE key = ?", (key,))
                self._events.forget(key)
            return len(keys)

        return await self._run(delete)
