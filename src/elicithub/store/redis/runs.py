"""The Redis backend's runs: `run:<id>` (JSON) with `run-owner:<id>` (taken over by compare-and-set), the set
`runs:unfinished`, and `alive:<instance>` heartbeats, all under `elicithub:`. The conversation's messages a run
started from are read from the conversation's own list."""

from __future__ import annotations

import json
from collections.abc import Sequence

import redis.asyncio as redis

from elicithub.core.runs import ConversationRecord, Message, RunRecord, conversation_key
from elicithub.store.redis.client import PREFIX
from elicithub.store.redis.conversations import WRITE, decode, messages_key, partial_json
from elicithub.store.steps import history_of, run_without_reading

FINISHED_TTL_S = 24 * 3600

_CLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2])
    return 1
end
return 0
"""

# KEYS: the run, its owner, the unfinished runs, its conversation, the conversation's messages. ARGV: the run's JSON,
# its owner, seconds a finished run is kept, its id, the conversation's JSON without version and log position,
# seconds a conversation is kept, the run's `history`, then the run's own messages. Returns the conversation's version
# written, or false when the run was no longer its active run.
_FINISH = (
    WRITE
    + """
local committed = false
local old = redis.call('HGET', KEYS[4], 'data')
if old and not string.find(old, '"messages":', 1, true) then
    local current = cjson.decode(old)
    local have = redis.call('LLEN', KEYS[5])
    local history = tonumber(ARGV[7])
    if current.active_run_id == ARGV[4] and have >= history then
        local version = tonumber(redis.call('HGET', KEYS[4], 'version')) + 1
        redis.call('HSET', KEYS[4], 'version', version, 'data', written(ARGV[5], version, current.active_run_after))
        push(KEYS[5], 8 + have - history)
        redis.call('EXPIRE', KEYS[4], ARGV[6])
        redis.call('EXPIRE', KEYS[5], ARGV[6])
        committed = version
    end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
redis.call('SREM', KEYS[3], ARGV[4])
return committed
"""
)


class RedisRuns:
    """Runs shared by several hub instances; an instance that stops heart-beating loses its runs."""

    def __init__(self, client: redis.Redis, retention_s: float) -> None:
        self._redis = client
        self._claim = client.register_script(_CLAIM)
        self._finish = client.register_script(_FINISH)
        self._retention_s = max(int(retention_s), 1)
        # A finished run is kept as long as an ended question, and never longer than its conversation.
        self._finished_ttl_s = min(FINISHED_TTL_S, self._retention_s)

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
                # Redis forgets a finished run by itself, when the hubs forget an ended question.
                pipe.expire(data, self._finished_ttl_s)
                pipe.expire(owner, self._finished_ttl_s)
            else:
                pipe.sadd(f"{PREFIX}runs:unfinished", record.run_id)
            await pipe.execute()

    async def get(self, run_id: str, *, messages: bool = True, known: Sequence[Message] = ()) -> RunRecord | None:
        raw, owner = await self._redis.mget(*self._keys(run_id))
        if raw is None:
            return None
        data = {**json.loads(raw), "owner": owner or ""}
        if (run := run_without_reading(data, messages=messages, known=known)) is not None:
            return run
        count = history_of(data)
        key = messages_key(conversation_key(data["user_id"], data["conversation_id"]))
        return RunRecord.from_json(data, decode(await self._redis.lrange(key, 0, count - 1)))

    async def finish(self, record: RunRecord) -> int | None:
        key = conversation_key(record.user_id, record.conversation_id)
        conversation = ConversationRecord(key, record.conversation_id, record.user_id, updated_at=record.updated_at)
        keys = [
            *self._keys(record.run_id),
            f"{PREFIX}runs:unfinished",
            f"{PREFIX}conversation:{key}",
            messages_key(key),
        ]
        args: list[str | int] = [
            json.dumps(record.to_json()),
            record.owner,
            self._finished_ttl_s,
            record.run_id,
            partial_json(conversation),
            self._retention_s,
            record.history,
            *(json.dumps(m, separators=(",", ":")) for m in record.messages[record.history :]),
        ]
        version = await self._finish(keys=keys, args=args)
        return None if version is None else int(version)

    async def claim(self, run_id: str, expected_owner: str, owner: str) -> bool:
        _, owner_key = self._keys(run_id)
        return bool(await self._claim(keys=[owner_key], args=[expected_owner, owner]))

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        # A random sample: over successive sweeps every unfinished run is looked at, however many there are.
        ids = list(await self._redis.srandmember(f"{PREFIX}runs:unfinished", limit) or [])
        records = [await self.get(str(i), messages=False) for i in ids]
        return [r for r in records if r is not None and r.status != "finished" and r.owner != other_than]

    async def purge(self, finished_before: float) -> int:
        return 0  # finished runs expire by their TTL

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        if ttl_s <= 0:  # gone now
            await self._redis.delete(f"{PREFIX}alive:{owner}")
        else:
            await self._redis.set(f"{PREFIX}alive:{owner}", "1", px=max(1, int(ttl_s * 1000)))

    async def alive(self, owner: str) -> bool:
        return bool(await self._redis.exists(f"{PREFIX}alive:{owner}"))
