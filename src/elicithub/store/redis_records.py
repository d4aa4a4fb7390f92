"""The Redis backend's runs, conversations, secrets and event logs (elicitations are in `store.redis`).

Keys, all under `elicithub:`: `run:<id>` (JSON) with `run-owner:<id>`, the set `runs:unfinished`, `alive:<instance>`
heartbeats; `conversation:<key>` (JSON, compare-and-set on its version by Lua); `vault:<key>` (base64);
`events:<key>` (a stream, ids `<seq>-1`) with `events-seq:<key>` (its counter).
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any, cast

import redis.asyncio as redis

from elicithub.core.runs import ConversationRecord, RunRecord
from elicithub.store.redis import PREFIX, bounded_close

FINISHED_TTL_S = 24 * 3600
BLOCK_SLICE_S = 1.0
"""A blocking read waits at most this long at a time, so a cancelled reader gives its connection back soon."""

_CLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2])
    return 1
end
return 0
"""

# KEYS: the conversation. ARGV: the expected version ('' for none yet), the new JSON, the new version, seconds kept.
_PUT_CONVERSATION = """
local current = redis.call('HGET', KEYS[1], 'version')
if (ARGV[1] == '' and current) or (ARGV[1] ~= '' and current ~= ARGV[1]) then
    return 0
end
redis.call('HSET', KEYS[1], 'version', ARGV[3], 'data', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""

# KEYS: the stream, its counter. ARGV: the event JSON, the bound, seconds kept.
_APPEND = """
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], seq .. '-1', 'e', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return seq
"""


class RedisRuns:
    """Runs shared by several hub instances; an instance that stops heart-beating loses its runs."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._claim = client.register_script(_CLAIM)

    @staticmethod
    def _keys(run_id: str) -> tuple[str, str]:
        return f"{PREFIX}run:{run_id}", f"{PREFIX}run-owner:{run_id}"

    async def save(self, record: RunRecord) -> None:
        data, owner = self._keys(record.run_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(data, json.dumps(record.to_json()))
            pipe.set(owner, record.owner)
            if record.status == "finished":
                pipe.srem(f"{PREFIX}runs:unfinished", record.run_id)
                # Redis forgets a finished run by itself, after the same day a finished question is kept.
                pipe.expire(data, FINISHED_TTL_S)
                pipe.expire(owner, FINISHED_TTL_S)
            else:
                pipe.sadd(f"{PREFIX}runs:unfinished", record.run_id)
            await pipe.execute()

    async def get(self, run_id: str) -> RunRecord | None:
        data, owner = await self._redis.mget(*self._keys(run_id))
        if data is None:
            return None
        return RunRecord.from_json({**json.loads(data), "owner": owner or ""})

    async def claim(self, run_id: str, expected_owner: str, owner: str) -> bool:
        _, owner_key = self._keys(run_id)
        return bool(await self._claim(keys=[owner_key], args=[expected_owner, owner]))

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        # A random sample: over successive sweeps every unfinished run is looked at, however many there are.
        ids = list(await self._redis.srandmember(f"{PREFIX}runs:unfinished", limit) or [])
        records = [await self.get(str(i)) for i in ids]
        return [r for r in records if r is not None and r.status != "finished" and r.owner != other_than]

    async def purge(self, finished_before: float) -> int:
        return 0  # finished runs expire by their TTL

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        await self._redis.set(f"{PREFIX}alive:{owner}", "1", px=int(ttl_s * 1000))

    async def alive(self, owner: str) -> bool:
        return bool(await self._redis.exists(f"{PREFIX}alive:{owner}"))


class RedisConversations:
    """Conversations shared by every hub; Redis forgets one `retention_s` after its last write."""

    def __init__(self, client: redis.Redis, retention_s: float) -> None:
        self._redis = client
        self._put = client.register_script(_PUT_CONVERSATION)
        self._retention_s = max(int(retention_s), 1)

    async def get(self, key: str) -> ConversationRecord | None:
        data = await self._redis.hget(f"{PREFIX}conversation:{key}", "data")
        return None if data is None else ConversationRecord.from_json(json.loads(data))

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        args: list[str | int] = [
            "" if expected_version is None else str(expected_version),
            json.dumps(record.to_json(), separators=(",", ":")),
            str(record.version),
            self._retention_s,
        ]
        return bool(await self._put(keys=[f"{PREFIX}conversation:{record.key}"], args=args))

    async def purge(self, idle_before: float) -> int:
        return 0  # idle conversations expire by their TTL


class RedisSecrets:
    """The vault's entries, base64 in Redis (the client decodes replies as text), expiry by Redis itself."""

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

    async def append(self, key: str, event: dict[str, Any]) -> int:
        data = json.dumps(event, separators=(",", ":"))
        return int(await self._append(keys=list(self._keys(key)), args=[data, self._max_len, self._retention_s]))

    async def read(self, key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, dict[str, Any]]]:
        entries = await self._redis.xrange(self._keys(key)[0], min=f"({after}-1", count=limit)
        return _decoded(entries)

    async def wait(self, key: str, after: int, timeout_s: float, limit: int = 1000) -> list[tuple[int, dict[str, Any]]]:
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


def _decoded(entries: Any) -> list[tuple[int, dict[str, Any]]]:
    return [(int(str(entry_id).split("-", 1)[0]), json.loads(fields["e"])) for entry_id, fields in entries]
