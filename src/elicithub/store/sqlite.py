"""The embedded default store: one SQLite file, transitions as compare-and-set updates."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncGenerator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from elicithub.core.elicitation import Answer, Elicitation, State, resolved
from elicithub.store.base import LocalResolutions

T = TypeVar("T")

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
"""


class SqliteDb:
    """One SQLite file in WAL mode, used from worker threads one statement batch at a time."""

    def __init__(self, path: Path, schema: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(schema)
        self._lock = threading.Lock()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn(self._db)

        return await asyncio.to_thread(locked)

    async def close(self) -> None:
        await self.run(lambda db: db.close())


class SqliteStore:
    def __init__(self, path: Path) -> None:
        self._file = SqliteDb(path, _SCHEMA)
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
            db.execute("BEGIN IMMEDIATE")
            try:
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
            finally:
                db.execute("COMMIT")

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
            cursor = db.execute("DELETE FROM elicitations WHERE resolved_at < ?", (resolved_before.timestamp(),))
            return cursor.rowcount

        return await self._run(delete)

    def resolutions(self) -> AsyncGenerator[str | None, None]:
        return self._resolutions.listen()

    async def close(self) -> None:
        await self._file.close()


def _dump(elicitation: Elicitation) -> str:
    return json.dumps(elicitation.to_json(), separators=(",", ":"))
