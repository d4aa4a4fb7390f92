"""The Redis backend's event logs: `elicithub:events:<key>`, a stream (ids `<seq>-1`), with `events-seq:<key>`, its
counter."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import redis.asyncio as redis

from elicithub.core.jsonwire import JsonObject
from elicithub.store.redis.client import PREFIX, bounded_close

BLOCK_SLICE_S = 1.0
"""A blocking read waits at most this long at a time, so a cancelled reader gives its connection back soon."""

# KEYS: the stream, its counter. ARGV: the event JSON, the bound, seconds kept.
_APPEND = """
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], seq .. '-1', 'e', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return seq
"""


class RedisEvents:
    """A Redis stream per conversation, so a reader on any hub follows a run going on at any other."""

    def __init__(self, client: redis.Redis, url: str, max_len: int, retention_s: float) -> None:
        self._redis = client
        self._append = client.register_script(_APPEND)
        self._max_len = max_len
        self._retention_s = max(int(retention_s), 1)
        # Blocking reads hold a connection while they wait: their own pool, so they never starve other commands.
        self._blocking: redis.Redis = redis.Redis.from_url(url, decode_responses=True)

    @staticmethod
    def _keys(key: str) -> tuple[str, str]:
        return f"{PREFIX}events:{key}", f"{PREFIX}events-seq:{key}"

    async def append(self, key: str, event: JsonObject) -> int:
        data = json.dumps(event, separators=(",", ":"))
        return int(await self._append(keys=list(self._keys(key)), args=[data, self._max_len, self._retention_s]))

    async def read(self, key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        entries = await self._redis.xrange(self._keys(key)[0], min=f"({after}-1", count=limit)
        return _decoded(entries)

    async def wait(self, key: str, after: int, timeout_s: float, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        stream = self._keys(key)[0]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            remaining = deadline - loop.time()
            block_ms = max(1, int(min(remaining, BLOCK_SLICE_S) * 1000))
            reply = await self._blocking.xread({stream: f"{after}-1"}, count=limit, block=block_ms)
            if reply:
                return _decoded(cast(list[Any], reply)[0][1])
            if deadline - loop.time() <= 0:
                return []

    async def last(self, key: str) -> int:
        value = await self._redis.get(self._keys(key)[1])
        return int(value or 0)

    async def close(self) -> None:
        await bounded_close(self._blocking.aclose())


def _decoded(entries: Any) -> list[tuple[int, JsonObject]]:
    return [(int(str(entry_id).split("-", 1)[0]), json.loads(fields["e"])) for entry_id, fields in entries]
