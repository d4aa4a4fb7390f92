"""The SQLite backend's conversations: written by compare-and-set on their version, their messages one row each
(added by the same transaction); a purge takes their messages and events."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace

from elicithub.core.ports import Added
from elicithub.core.runs import ConversationRecord, Message, RunRecord, conversation_key
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.sqlite.events import SqliteEvents
from elicithub.store.steps import PURGE_BATCH

_COUNT = "SELECT coalesce(max(pos) + 1, 0) FROM conversation_messages WHERE key = ?"


def read_messages(db: sqlite3.Connection, key: str, count: int | None = None) -> list[Message]:
    """A conversation's messages (its first `count` of them), decoded as one JSON array."""
    if count is None:
        rows = db.execute("SELECT data FROM conversation_messages WHERE key = ? ORDER BY pos", (key,))
    else:
        rows = db.execute("SELECT data FROM conversation_messages WHERE key = ? AND pos < ? ORDER BY pos", (key, count))
    messages: list[Message] = json.loads("[" + ",".join(row[0] for row in rows) + "]")
    return messages


def write(
    db: sqlite3.Connection, record: ConversationRecord, expected_version: int | None, added: Sequence[Message]
) -> bool:
    """`ConversationStore.put` in the transaction of `db`, adding `added` after the `record.stored` messages."""
    row = (
        record.version,
        int(record.active_run_id is not None),
        record.updated_at,
        json.dumps(record.to_json(), separators=(",", ":")),
        record.key,
    )
    if expected_version is None:
        cursor = db.execute(
            "INSERT OR IGNORE INTO conversations (version, active, updated_at, data, key) VALUES (?, ?, ?, ?, ?)", row
        )
    else:
        cursor = db.execute(
            "UPDATE conversations SET version = ?, active = ?, updated_at = ?, data = ? WHERE key = ? AND version = ?",
            (*row, expected_version),
        )
    if cursor.rowcount != 1:
        return False
    # Rows past `stored` are not this conversation's (it was read with its messages inline, in a row of an earlier
    # version, or is new): the list goes on from what the writer read.
    start = record.stored
    db.execute("DELETE FROM conversation_messages WHERE key = ? AND pos >= ?", (record.key, start))
    db.executemany(
        "INSERT INTO conversation_messages (key, pos, data) VALUES (?, ?, ?)",
        [(record.key, pos, json.dumps(m, separators=(",", ":"))) for pos, m in enumerate(added, start)],
    )
    return True


def commit(db: sqlite3.Connection, run: RunRecord) -> int | None:
    """`RunStore.finish`'s commit of `run` to its conversation (see there), in the transaction of `db`."""
    key = conversation_key(run.user_id, run.conversation_id)
    row = db.execute("SELECT data FROM conversations WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    data = json.loads(row[0])
    stored = db.execute(_COUNT, (key,)).fetchone()[0]
    if "messages" in data or data["active_run_id"] != run.run_id or stored < run.history:
        return None
    current = ConversationRecord.from_json(data, run.messages, stored)
    done = replace(current, active_run_id=None, version=current.version + 1, updated_at=run.updated_at)
    write(db, done, current.version, run.messages[stored:])
    return done.version


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
        return await self._run(lambda db: write(db, record, expected_version, record.messages[record.stored :]))

    async def send(self, record: ConversationRecord) -> Added | None:
        def send(db: sqlite3.Connection) -> Added | None:
            row = db.execute("SELECT data FROM conversations WHERE key = ?", (record.key,)).fetchone()
            if row is None:
                written = replace(record, version=1, active_run_after=0, stored=0)
                write(db, written, None, record.messages)
                return Added(None, replace(written, messages=[], stored=len(record.messages)))
            data = json.loads(row[0])
            if "messages" in data:
                return None
            stored = db.execute(_COUNT, (record.key,)).fetchone()[0]
            previous = ConversationRecord.from_json(data, stored=stored)
            after = db.execute("SELECT MAX(seq) FROM events WHERE key = ?", (record.key,)).fetchone()[0] or 0
            written = replace(record, version=previous.version + 1, active_run_after=after, stored=stored)
            write(db, written, previous.version, record.messages[-1:])
            return Added(previous, replace(written, messages=[], stored=stored + 1))

        return await self._run(send)

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
