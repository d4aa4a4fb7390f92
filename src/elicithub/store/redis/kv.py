"""The Redis backend's key-value entries: `elicithub:vault:<key>` (the prefix from when the vault was its one user)."""

from __future__ import annotations

import base64

import redis.asyncio as redis

from elicithub.store.redis.client import PREFIX


class RedisKv:
    """Entries base64 in Redis (the client decodes replies as text), expiry by Redis itself."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    async def put(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        ttl = None if ttl_s is None else max(1, int(ttl_s * 1000))
        await self._redis.set(f"{PREFIX}vault:{key}", base64.b64encode(value).decode(), px=ttl)

    async def get(self, key: str) -> bytes | None:
        value = await self._redis.get(f"{PREFIX}vault:{key}")
        return None if value is None else base64.b64decode(value)

    async def take(self, key: str) -> bytes | None:
        value = await self._redis.getdel(f"{PREFIX}vault:{key}")
        return None if value is None else base64.b64decode(value)

    async def delete(self, key: str) -> None:
        await self._redis.delete(f"{PREFIX}vault:{key}")
