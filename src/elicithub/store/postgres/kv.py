"""The Postgres backend's key-value entries, its lists of expiring entries (a row each in `elicithub_kv_entries`) and
its sets of held members (a row each in `elicithub_kv_holds`); writes delete a batch of expired ones now and then."""

from __future__ import annotations

import time

from elicithub.core.ports import Entry, Held
from elicithub.store.postgres.db import PostgresDb
from elicithub.store.steps import PURGE_BATCH

PUT = """
INSERT INTO elicithub_kv (key, value, expires_at) VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
"""
GET = "SELECT value FROM elicithub_kv WHERE key = $1 AND (expires_at IS NULL OR expires_at > $2)"
TAKE = "DELETE FROM elicithub_kv WHERE key = $1 AND (expires_at IS NULL OR expires_at > $2) RETURNING value"
DELETE = "DELETE FROM elicithub_kv WHERE key = $1"
PURGE = """
DELETE FROM elicithub_kv WHERE key IN (
    SELECT key FROM elicithub_kv WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2
)
"""

# Removes the list's own expired entries in the same statement: a list someone adds to stays as short as its
# entries' lifetime.
ADD_ENTRY = """
WITH expired AS (DELETE FROM elicithub_kv_entries WHERE key = $1 AND expires_ms <= $2)
INSERT INTO elicithub_kv_entries (key, expires_ms, value) VALUES ($1, $3, $4) ON CONFLICT DO NOTHING
"""
ENTRIES = """
SELECT expires_ms, value FROM elicithub_kv_entries WHERE key = $1 AND expires_ms > $2
ORDER BY expires_ms DESC, value DESC LIMIT $3
"""
ENTRIES_BEFORE = """
SELECT expires_ms, value FROM elicithub_kv_entries
WHERE key = $1 AND expires_ms > $2 AND (expires_ms, value) < ($4, $5)
ORDER BY expires_ms DESC, value DESC LIMIT $3
"""
PURGE_ENTRIES = """
DELETE FROM elicithub_kv_entries WHERE (key, expires_ms, value) IN (
    SELECT key, expires_ms, value FROM elicithub_kv_entries WHERE expires_ms <= $1 LIMIT $2
)
"""
HOLD = "SELECT taken, held, first_end FROM elicithub_hold($1, $2, $3, $4, $5)"
RELEASE = "DELETE FROM elicithub_kv_holds WHERE key = $1 AND member = $2"
HOLDING = "SELECT count(*), coalesce(min(expires_ms), 0) FROM elicithub_kv_holds WHERE key = $1 AND expires_ms > $2"
PURGE_HOLDS = """
DELETE FROM elicithub_kv_holds WHERE (key, member) IN (
    SELECT key, member FROM elicithub_kv_holds WHERE expires_ms <= $1 LIMIT $2
)
"""

PURGE_EVERY = 256
"""Writes between two purges of expired entries (which nothing reads any more, but which take room)."""


class PostgresKv:
    def __init__(self, db: PostgresDb) -> None:
        self._db = db
        self._writes = 0
        self._adds = 0
        self._holds = 0

    async def put(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        pool = await self._db.pool()
        now = time.time()
        await pool.execute(PUT, key, value, None if ttl_s is None else now + ttl_s)
        self._writes += 1
        if self._writes % PURGE_EVERY == 0:
            await pool.execute(PURGE, now, PURGE_BATCH)

    async def get(self, key: str) -> bytes | None:
        pool = await self._db.pool()
        value = await pool.fetchval(GET, key, time.time())
        return None if value is None else bytes(value)

    async def take(self, key: str) -> bytes | None:
        pool = await self._db.pool()
        value = await pool.fetchval(TAKE, key, time.time())
        return None if value is None else bytes(value)

    async def delete(self, key: str) -> None:
        pool = await self._db.pool()
        await pool.execute(DELETE, key)

    async def add_entry(self, key: str, value: str, ttl_s: float) -> None:
        pool = await self._db.pool()
        now_ms = int(time.time() * 1000)
        await pool.execute(ADD_ENTRY, key, now_ms, now_ms + int(ttl_s * 1000), value)
        self._adds += 1
        if self._adds % PURGE_EVERY == 0:
            await pool.execute(PURGE_ENTRIES, now_ms, PURGE_BATCH)

    async def entries(self, key: str, limit: int, before: Entry | None = None) -> list[Entry]:
        pool = await self._db.pool()
        now_ms = int(time.time() * 1000)
        if before is None:
            rows = await pool.fetch(ENTRIES, key, now_ms, limit)
        else:
            rows = await pool.fetch(ENTRIES_BEFORE, key, now_ms, limit, *before)
        return [Entry(int(row["expires_ms"]), str(row["value"])) for row in rows]

    async def hold(self, key: str, member: str, ttl_s: float, limit: int | None = None) -> Held:
        pool = await self._db.pool()
        now_ms = int(time.time() * 1000)
        row = await pool.fetchrow(HOLD, key, member, now_ms, now_ms + int(ttl_s * 1000), limit)
        self._holds += 1
        if self._holds % PURGE_EVERY == 0:  # sets nobody holds in any more
            await pool.execute(PURGE_HOLDS, now_ms, PURGE_BATCH)
        assert row is not None  # the function returns one row
        return Held(bool(row["taken"]), int(row["held"]), int(row["first_end"]))

    async def release(self, key: str, member: str) -> None:
        pool = await self._db.pool()
        await pool.execute(RELEASE, key, member)

    async def holding(self, key: str) -> Held:
        pool = await self._db.pool()
        row = await pool.fetchrow(HOLDING, key, int(time.time() * 1000))
        assert row is not None  # an aggregate's one row
        return Held(False, int(row[0]), int(row[1]))
