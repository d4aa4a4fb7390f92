"""A small keyed store of opaque bytes for the vault: memory or a table in the hub's SQLite file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Protocol

from elicithub.store.sqlite import SqliteDb


class SecretKV(Protocol):
    async def put(self, key: str, value: bytes, ttl_s: float | None = None) -> None: ...

    async def get(self, key: str) -> bytes | None: ...

    async def take(self, key: str) -> bytes | None:
        """Read and delete in one step: of several takers of one key exactly one gets the value."""

    async def delete(self, key: str) -> None: ...

    async def close(self) -> None: ...


class MemoryKV:
    def __init__(self) -> None:
        self._items: dict[str, tuple[bytes, float | None]] = {}

    def _live(self, key: str) -> bytes | None:
        item = self._items.get(key)
        if item is None:
            return None
        if item[1] is not None and item[1] <= time.time():
            del self._items[key]
            return None
        return item[0]

    async def put(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        self._items[key] = (value, None if ttl_s is None else time.time() + ttl_s)

    async def get(self, key: str) -> bytes | None:
        return self._live(key)

    async def take(self, key: str) -> bytes | None:
        value = self._live(key)
        self._items.pop(key, None)
        return value

    async def delete(self, key: str) -> None:
        self._items.pop(key, None)

    async def close(self) -> None:
        self._items.clear()


_SCHEMA = "CREATE TABLE IF NOT EXISTS vault (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at REAL)"


class SqliteKV:
    def __init__(self, path: Path) -> None:
        self._file = SqliteDb(path, _SCHEMA)
        self._run = self._file.run

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

    async def close(self) -> None:
        await self._file.close()


def open_kv(store_url: str) -> SecretKV:
    """The vault lives beside the elicitations: in memory, in the same SQLite file, or in the same Redis."""
    if store_url.startswith("sqlite:///"):
        return SqliteKV(Path(store_url.removeprefix("sqlite:///")))
    if store_url.startswith("redis://"):
        return RedisKV(store_url)
    return MemoryKV()


class RedisKV:
    """The vault shared by several hub processes: one Redis key per entry, expiry by Redis itself."""

    def __init__(self, url: str) -> None:
        import redis.asyncio as redis

        self._redis = redis.Redis.from_url(url)

    async def put(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        await self._redis.set(f"elicithub:vault:{key}", value, px=None if ttl_s is None else max(1, int(ttl_s * 1000)))

    async def get(self, key: str) -> bytes | None:
        value = await self._redis.get(f"elicithub:vault:{key}")
        return None if value is None else _as_bytes(value)

    async def take(self, key: str) -> bytes | None:
        value = await self._redis.getdel(f"elicithub:vault:{key}")
        return None if value is None else _as_bytes(value)

    async def delete(self, key: str) -> None:
        await self._redis.delete(f"elicithub:vault:{key}")

    async def close(self) -> None:
        from elicithub.store.redis import bounded_close

        await bounded_close(self._redis.aclose())


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value
