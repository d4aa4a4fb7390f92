"""The SQLite backend's elicitations: one row each, resolved by compare-and-set on the pending state."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncGenerator
from datetime import datetime
from pathlib import Path
from typing import Any

from elicithub.core.elicitation import Answer, Elicitation, State, resolved
from elicithub.store.notices import LocalResolutions
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.sqlite.schema import SCHEMA
from elicithub.store.steps import PURGE_BATCH


class SqliteElicitations:
    def __init__(self, path_or_db: Path | SqliteDb) -> None:
        self._file = path_or_db if isinstance(path_or_db, SqliteDb) else SqliteDb(path_or_db, SCHEMA)
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

    async def watch(self, elicitation_id: str) -> Elicitation | None:
        return await self.get(elicitation_id)  # one process: its listeners hear every end

    async def transition(
        self, elicitation_id: str, state: State, answer: Answer | None, at: datetime, read: Elicitation | None = None
    ) -> bool:
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
