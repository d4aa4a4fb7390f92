"""The SQLite backend's key-value entries, in the `vault` table (its name from when the vault was its one user), and
its lists of expiring entries, one row each in `kv_entries`."""

from __future__ import annotations

import sqlite3
import time

from elicithub.core.ports import Entry
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.steps import PURGE_BATCH

PURGE_EVERY = 256
"""Adds between two purges of every list's expired entries (an add removes its own list's)."""


class SqliteKv:
    def __init__(self, db: SqliteDb) -> None:
        self._run = db.run
        self._adds = 0

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

    async def add_entry(self, key: str, value: str, ttl_s: float) -> None:
        now_ms = int(time.time() * 1000)
        self._adds += 1
        purge = self._adds % PURGE_EVERY == 0

        def add(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM kv_entries WHERE key = ? AND expires_ms <= ?", (key, now_ms))
            db.execute("INSERT OR IGNORE INTO kv_entries VALUES (?, ?, ?)", (key, now_ms + int(ttl_s * 1000), value))
            if purge:
                db.execute(
                    "DELETE FROM kv_entries WHERE (key, expires_ms, value) IN "
                    "(SELECT key, expires_ms, value FROM kv_entries WHERE expires_ms <= ? LIMIT ?)",
                    (now_ms, PURGE_BATCH),
                )

        await self._run(add)

    async def entries(self, key: str, limit: int, before: Entry | None = None) -> list[Entry]:
        after = "" if before is None else "AND (expires_ms, value) < (?, ?)"
        bound = () if before is None else tuple(before)

        def read(db: sqlite3.Connection) -> list[Entry]:
            rows = db.execute(
                f"SELECT expires_ms, value FROM kv_entries WHERE key = ? AND expires_ms > ? {after} "
                "ORDER BY expires_ms DESC, value DESC LIMIT ?",
                (key, int(time.time() * 1000), *bound, limit),
            ).fetchall()
            return [Entry(int(expires_ms), str(value)) for expires_ms, value in rows]

        return await self._run(read)
