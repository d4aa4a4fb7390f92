"""The Postgres backend's key-value entries; writes delete a batch of expired entries now and then."""

from __future__ import annotations

import time

from elicithub.store.postgres.db import PostgresDb
from elicithub.store.postgres.schema import PURGE_BATCH

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

PURGE_EVERY = 256
"""Writes between two purges of expired entries (which nothing reads any more, but which take room)."""


class PostgresKv:
    def __init__(self, db: PostgresDb) -> None:
        self._db = db
        self._writes = 0

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
