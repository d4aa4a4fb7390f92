"""The SQLite backend's key-value entries, in the `vault` table (its name from when the vault was its one user), its
lists of expiring entries, one row each in `kv_entries`, and its sets of held members, one row each in `kv_holds`."""

from __future__ import annotations

import sqlite3
import time

from elicithub.core.ports import Entry, Held
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.steps import PURGE_BATCH

PURGE_EVERY = 256
"""Adds (holds) between two purges of every list's expired entries (set's members): an add removes its own list's."""


class SqliteKv:
    def __init__(self, db: SqliteDb) -> None:
        self._run = db.run
        self._adds = 0
        self._holds = 0

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

    async def hold(self, key: str, member: str, ttl_s: float, limit: int | None = None) -> Held:
        now_ms = int(time.time() * 1000)
        self._holds += 1
        purge = self._holds % PURGE_EVERY == 0

        def hold(db: sqlite3.Connection) -> Held:
            # One process writes the file, a batch of statements at a time: nothing comes between these.
            db.execute("DELETE FROM kv_holds WHERE key = ? AND expires_ms <= ?", (key, now_ms))
            count, mine = db.execute(
                "SELECT count(*), coalesce(sum(member = ?), 0) FROM kv_holds WHERE key = ?", (member, key)
            ).fetchone()
            taken = bool(mine) or limit is None or count < limit
            if taken:
                ends = now_ms + int(ttl_s * 1000)
                db.execute("INSERT OR REPLACE INTO kv_holds VALUES (?, ?, ?)", (key, member, ends))
            if purge:
                db.execute(
                    "DELETE FROM kv_holds WHERE (key, member) IN "
                    "(SELECT key, member FROM kv_holds WHERE expires_ms <= ? LIMIT ?)",
                    (now_ms, PURGE_BATCH),
                )
            return _held(db, key, now_ms, taken)

        return await self._run(hold)

    async def release(self, key: str, member: str) -> None:
        await self._run(lambda db: db.execute("DELETE FROM kv_holds WHERE key = ? AND member = ?", (key, member)))

    async def holding(self, key: str) -> Held:
        now_ms = int(time.time() * 1000)
        return await self._run(lambda db: _held(db, key, now_ms, False))


def _held(db: sqlite3.Connection, key: str, now_ms: int, taken: bool) -> Held:
    count, first = db.execute(
        "SELECT count(*), coalesce(min(expires_ms), 0) FROM kv_holds WHERE key = ? AND expires_ms > ?", (key, now_ms)
    ).fetchone()
    return Held(taken, int(count), int(first))
