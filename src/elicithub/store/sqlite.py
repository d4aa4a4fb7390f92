"""The embedded default backend: every record kind in one SQLite file, writes as compare-and-set updates."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from elicithub.core.elicitation import Answer, Elicitation, State, resolved
from elicithub.core.runs import ConversationRecord, RunRecord
from elicithub.store.base import LocalResolutions
from elicithub.store.sqlite_events import SqliteEvents

T = TypeVar("T")

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


_Op = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]"]


class _Failed(Exception):
    """A statement batch failed and was rolled back (its cause says why)."""


class SqliteDb:
    """One SQLite file in WAL mode, written from the event loop in batches: every statement batch asked for in one
    turn of the loop runs in one transaction (if one of them fails, each runs again alone), so a busy hub commits
    once for many writes and pays no thread hop per statement. Nothing here waits for the disk: commits are
    `synchronous=NORMAL` (WAL: a crash of the process loses nothing; a power cut may lose the last commits), and
    the WAL is copied back into the database file (the step that syncs) by a thread of its own, off the loop."""

    def __init__(self, path: Path, schema: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer thread does it
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(schema)
        self._queue: list[_Op] = []
        self._closed = False
        self._checkpointer = _Checkpointer(path)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` inside this turn's transaction; its own failure undoes only its own statements."""
        if self._closed:
            raise sqlite3.ProgrammingError("the SQLite store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._queue:
            loop.call_soon(self._flush)
        self._queue.append((fn, future))
        return await future

    def _flush(self) -> None:
        batch, self._queue = self._queue, []
        try:
            results = self._transaction(batch)
        except _Failed:
            # One of them failed: undo them all and give each its own transaction, so only it fails.
            results = [result for op in batch for result in self._alone(op)]
        for future, result, error in results:
            if future.done():  # its caller went away
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)
        self._checkpointer.wrote(len(batch))

    def _transaction(self, batch: list[_Op]) -> list[tuple[asyncio.Future[Any], Any, BaseException | None]]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            results: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = [
                (future, fn(db), None) for fn, future in batch
            ]
            db.execute("COMMIT")
        except Exception as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise _Failed from exc
        return results

    def _alone(self, op: _Op) -> list[tuple[asyncio.Future[Any], Any, BaseException | None]]:
        try:
            return self._transaction([op])
        except _Failed as failed:
            assert failed.__cause__ is not None
            return [(op[1], None, failed.__cause__)]

    async def close(self) -> None:
        if self._closed:
            return
        if self._queue:
            self._flush()
        self._closed = True
        await asyncio.to_thread(self._checkpointer.stop)
        self._db.close()


class _Checkpointer:
    """Copies the WAL back into the database file now and then, on its own connection and thread."""

    EVERY_S = 1.0

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wake = threading.Event()
        self._stopping = False
        self._pending = 0
        self._thread = threading.Thread(target=self._loop, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def wrote(self, statements: int) -> None:
        self._pending += statements
        if self._pending >= 1000:
            self._wake.set()

    def _loop(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None)
        db.execute("PRAGMA busy_timeout=5000")
        try:
            while not self._stopping:
                self._wake.wait(self.EVERY_S)
                self._wake.clear()
                if self._pending:
                    self._pending = 0
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()


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
