"""The embedded default backend: every record kind in one SQLite file, writes as compare-and-set updates."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncGenerator
from datetime import datetime
from pathlib import Path
from typing import Any

from elicithub.core.elicitation import Answer, Elicitation, State, resolved
from elicithub.core.runs import ConversationRecord, RunRecord
from elicithub.store.base import LocalResolutions
from elicithub.store.sqlite_db import SqliteDb
from elicithub.store.sqlite_events import SqliteEvents

PURGE_BATCH = 2000
"""Rows one purge deletes at most: it runs on the event loop, so a backlog goes a batch per sweep (every few s)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS elicitations (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    expires_at REAL NOT NULL,
    resolved_at REAL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS elicitations_pending ON elicitations (state, expires_at);
CREATE INDEX IF NOT EXISTS elicitations_resolved ON elicitations (resolved_at);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    owner TEXT NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL
);
DROP INDEX IF EXISTS runs_unfinished;
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, updated_at);
CREATE TABLE IF NOT EXISTS conversations (
    key TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    active INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_idle ON conversations (active, updated_at);
CREATE TABLE IF NOT EXISTS events (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (key, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vault (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at REAL);
"""


class SqliteStore:
    def __init__(self, path_or_db: Path | SqliteDb) -> None:
        self._file = path_or_db if isinstance(path_or_db, SqliteDb) else SqliteDb(path_or_db, _SCHEMA)
        self._run = self._file.run
        self._resolutions = LocalResolutions()

    async def put(self, elicitation: Elicitation) -> None:
        row = (elicitation.id, elicitation.state.value, elicitation.expires_at.timestamp(), _dump(elicitation))
        await self._run(lambda db: db.execute("INSERT INTO elicitations VALUES (?, ?, ?, NULL, ?)", row))

    async def get(self, elicitation_id: str) -> Elicitation | None:
        def read(db: sqlite3.Connection) -> Any:
            return db.execute("SELECT data FROM elicitations WHERE id = ?", (elicitation_id,)).fetchone()

        row = await self._run(read)
        return None if row is None else Elicitation.from_json(json.loads(row[0]))

    async def transition(self, elicitation_id: str, state: State, answer: Answer | None, at: datetime) -> bool:
        def cas(db: sqlite3.Connection) -> bool:
            row = db.execute(
                "SELECT data FROM elicitations WHERE id = ? AND state = 'pending'", (elicitation_id,)
            ).fetchone()
            if row is None:
                return False
            done = resolved(Elicitation.from_json(json.loads(row[0])), state, answer, at)
            cursor = db.execute(
                "UPDATE elicitations SET state = ?, resolved_at = ?, data = ? WHERE id = ? AND state = 'pending'",
                (state.value, at.timestamp(), _dump(done), elicitation_id),
            )
            return cursor.rowcount == 1

        if not await self._run(cas):
            return False
        self._resolutions.announce(elicitation_id)
        return True

    async def due(self, now: datetime, limit: int = 500) -> list[Elicitation]:
        def read(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "SELECT data FROM elicitations WHERE state = 'pending' AND expires_at <= ? LIMIT ?",
                (now.timestamp(), limit),
            ).fetchall()

        return [Elicitation.from_json(json.loads(row[0])) for row in await self._run(read)]

    async def purge(self, resolved_before: datetime) -> int:
        def delete(db: sqlite3.Connection) -> int:
            cursor = db.execute(
                "DELETE FROM elicitations WHERE id IN (SELECT id FROM elicitations WHERE resolved_at < ? LIMIT ?)",
                (resolved_before.timestamp(), PURGE_BATCH),
            )
            return cursor.rowcount

        return await self._run(delete)

    def resolutions(self) -> AsyncGenerator[str | None, None]:
        return self._resolutions.listen()

    async def close(self) -> None:
        await self._file.close()


def _dump(elicitation: Elicitation) -> str:
    return json.dumps(elicitation.to_json(), separators=(",", ":"))


class SqliteRuns:
    """Runs of one hub process: any owner but the current one is gone (a restart), so nobody else is alive."""

    def __init__(self, db: SqliteDb) -> None:
        self._run = db.run

    async def save(self, record: RunRecord) -> None:
        row = (record.run_id, record.status, record.owner, record.updated_at, json.dumps(record.to_json()))
        await self._run(lambda db: db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?)", row))

    async def get(self, run_id: str) -> RunRecord | None:
        def read(db: sqlite3.Connection) -> Any:
            return db.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()

        row = await self._run(read)
        return None if row is None else RunRecord.from_json(json.loads(row[0]))

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

        return [RunRecord.from_json(json.loads(row[0])) for row in await self._run(read)]

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


class SqliteSecrets:
    def __init__(self, db: SqliteDb) -> None:
        self._run = db.run

    async def put(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        expires = None if ttl_s is None else time.time() + ttl_s
        await self._run(lambda db: db.execute("INSERT OR REPLACE INTO vault VALUES (?, ?, ?)", (key, value, expires)))

    async def get(self, key: str) -> bytes | None:
        def read(db: sqlite3.Connection) -> bytes | None:
            row = db.execute(
                "SELECT value FROM vault WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)", (key, time.time())
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await self._run(read)

    async def take(self, key: str) -> bytes | None:
        def take(db: sqlite3.Connection) -> bytes | None:
            row = db.execute(
                "DELETE FROM vault WHERE key = ? AND (expires_at IS NULL OR expires_at > ?) RETURNING value",
                (key, time.time()),
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await self._run(take)

    async def delete(self, key: str) -> None:
        await self._run(lambda db: db.execute("DELETE FROM vault WHERE key = ?", (key,)))


class SqliteBackend:
    shared = False
    durable = True

    def __init__(self, path: Path, events_max_len: int = 1000) -> None:
        self.url = f"sqlite:///{path}"
        self._db = SqliteDb(path, _SCHEMA)
        self.elicitations = SqliteStore(self._db)
        self.runs = SqliteRuns(self._db)
        self.events = SqliteEvents(self._db, events_max_len)
        self.conversations = SqliteConversations(self._db, self.events)
        self.secrets = SqliteSecrets(self._db)

    async def close(self) -> None:
        await self._db.close()
