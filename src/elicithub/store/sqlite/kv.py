"""The SQLite backend's key-value entries, in the `vault` table (its name from when the vault was its one user)."""

from __future__ import annotations

import sqlite3
import time

from elicithub.store.sqlite.db import SqliteDb


class SqliteKv:
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
