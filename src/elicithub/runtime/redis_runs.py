"""Paused runs in Redis, shared by several hub processes; a process that stops heart-beating loses its runs."""

from __future__ import annotations

import json

import redis.asyncio as redis

from elicithub.runtime.runs import RunRecord
from elicithub.store.redis import bounded_close

_PREFIX = "elicithub:"
FINISHED_TTL_S = 24 * 3600
_CLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2])
    return 1
end
return 0
"""


class RedisRuns:
    def __init__(self, url: str) -> None:
        self._redis: redis.Redis = redis.Redis.from_url(url, decode_responses=True)
        self._claim = self._redis.register_script(_CLAIM)

    @staticmethod
    def _keys(conversation_id: str) -> tuple[str, str]:
        return f"{_PREFIX}run:{conversation_id}", f"{_PREFIX}run-owner:{conversation_id}"

    async def save(self, record: RunRecord) -> None:
        data, owner = self._keys(record.conversation_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(data, json.dumps(record.to_json()))
            pipe.set(owner, record.owner)
            if record.status == "finished":
                pipe.srem(f"{_PREFIX}runs:unfinished", record.conversation_id)
                # Redis forgets a finished run by itself, after the same day a finished question is kept.
                pipe.expire(data, FINISHED_TTL_S)
                pipe.expire(owner, FINISHED_TTL_S)
            else:
                pipe.sadd(f"{_PREFIX}runs:unfinished", record.conversation_id)
            await pipe.execute()

    async def get(self, conversation_id: str) -> RunRecord | None:
        data, owner = await self._redis.mget(*self._keys(conversation_id))
        if data is None:
            return None
        return RunRecord.from_json({**json.loads(data), "owner": owner or ""})

    async def claim(self, conversation_id: str, expected_owner: str, owner: str) -> bool:
        _, owner_key = self._keys(conversation_id)
        return bool(await self._claim(keys=[owner_key], args=[expected_owner, owner]))

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        # A random sample: over successive sweeps every unfinished run is looked at, however many there are.
        ids = list(await self._redis.srandmember(f"{_PREFIX}runs:unfinished", limit) or [])
        records = [await self.get(str(i)) for i in ids]
        return [r for r in records if r is not None and r.status != "finished" and r.owner != other_than]

    async def purge(self, finished_before: float) -> int:
        return 0  # finished runs expire by their TTL

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        await self._redis.set(f"{_PREFIX}alive:{owner}", "1", px=int(ttl_s * 1000))

    async def alive(self, owner: str) -> bool:
        return bool(await self._redis.exists(f"{_PREFIX}alive:{owner}"))

    async def close(self) -> None:
        await bounded_close(self._redis.aclose())
