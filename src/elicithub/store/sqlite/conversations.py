"""The SQLite backend's conversations: written by compare-and-set on their version, their messages one row each
(added by the same transaction); a purge takes their messages and events."""

from __future__ import annotations

import json
import sqlite3

from elicithub.core.runs import ConversationRecord, Message
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.sqlite.events import SqliteEvents
from elicithub.store.sqlite.schema import PURGE_BATCH

_COUNT = "SELECT coalesce(max(pos) + 1, 0) FROM conversation_messages WHERE key = ?"


def read_messages(db: sqlite3.Connection, key: str, count: int | None = None) -> list[Message]:
    """A conversation's messages (its first `count` of them), decoded as one JSON array."""
    if count is None:
        rows = db.execute("SELECT data FROM conversation_messages WHERE key = ? ORDER BY pos", (key,))
    else:
        rows = db.execute("SELECT data FROM conversation_messages WHERE key = ? AND pos < ? ORDER BY pos", (key, count))
    messages: list[Message] = json.loads("[" + ",".join(row[0] for row in rows) + "]")
    return messages


class SqliteConversations:
    ordered = True  # one writer, in the order asked

    def __init__(self, db: SqliteDb, events: SqliteEvents) -> None:
        self._run = db.run
        self._events = events

    async def get(self, key: str, *, messages: bool = True) -> ConversationRecord | None:
        def read(db: sqlite3.Connection) -> ConversationRecord | None:
            row = db.execute("SELECT data FROM conversations WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            data = json.loads(row[0])
            if messages:
                kept = read_messages(db, key)
                return ConversationRecord.from_json(data, kept, len(kept))
            return ConversationRecord.from_json(data, stored=db.execute(_COUNT, (key,)).fetchone()[0])

        return await self._run(read)

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        row = (
            record.version,
            int(record.active_run_id is not None),
            record.updated_at,
            json.dumps(record.to_json(), separators=(",", ":")),
            record.key,
        )
        start = record.stored
        added = [
            (record.key, pos, json.dumps(m, separators=(",", ":")))
            for pos, m in enumerate(record.messages[start:], start)
        ]

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
            if cursor.rowcount != 1:
                return False
            # Rows past `start` are not this conversation's (it was read with its messages inline, in a row of an
            # earlier version, or is new): the list goes on from what the writer read.
            db.execute("DELETE FROM conversation_messages WHERE key = ? AND pos >= ?", (record.key, start))
            db.executemany("INSERT INTO conversation_messages (key, pos, data) VALUES (?, ?, ?)", added)
            return True

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
                db.execute("DELETE FROM conversation_messages WHERE key = ?", (key,))
                db.execute("DELETE FROM events WHERE key = ?", (key,))
                self._events.forget(key)
            return len(keys)

        return await self._run(delete)
