"""The Redis backend's elicitations, shared by every hub that points at it.

Keys, all under `elicithub:`: one JSON string per elicitation (`elicithub:elicitation:<id>`), a sorted set of pending
ids by deadline (`elicithub:pending`) and one of terminal ids by resolution time (`elicithub:resolved`), and for each
pending elicitation the set of channels of the clients that wait on it (`elicithub:waiters:<id>`, its lease): the
client that stores it, and any that `watch` it. The lease expires with the elicitation's key (same lifetime, set
together), so it cannot lapse while the elicitation is stored. A transition is a compare-and-set in one Lua script,
which publishes the id on the channel of each lease holder and drops the lease: a hub hears only the ends of the
questions it waits on, not every hub's.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import cast

import redis.asyncio as redis

from elicithub.core.elicitation import Answer, Elicitation, State, resolved, utcnow
from elicithub.store.redis.client import PREFIX, bounded_close, close_pubsub, connect

PENDING = f"{PREFIX}pending"
RESOLVED = f"{PREFIX}resolved"

KEEP = timedelta(days=7)
"""A safety net: Redis drops an elicitation this long after its deadline or resolution even if no hub purges it."""
LISTEN_POLL_S = 1.0
KNOWN = 1024
"""How many elicitations a hub remembers as last read: a terminal one never changes again, so it is served from
memory; a pending one only spares a transition its read (the compare-and-set still checks it)."""

# KEYS: the elicitation, the pending set, the resolved set, its lease. ARGV: the JSON read before, the new JSON,
# the id, the resolution time, seconds to keep. Comparing the whole value makes this a compare-and-set: only a
# transition changes a stored elicitation, so if it is still what was read, it is still pending. When it is not,
# the script returns what is stored (nil when nothing), so the caller need not read it again.
_TRANSITION = """
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
    return {current}
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[5])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
for _, channel in ipairs(redis.call('SMEMBERS', KEYS[4])) do
    redis.call('PUBLISH', channel, ARGV[3])
end
redis.call('DEL', KEYS[4])
return 1
"""

# KEYS: the elicitation, its lease, the pending set. ARGV: the id, the caller's channel. Joins the lease of a
# pending elicitation, for as long as its key lives, and returns it as stored after that (nil when gone).
_WATCH = """
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then
        redis.call('SADD', KEYS[2], ARGV[2])
        redis.call('PEXPIRE', KEYS[2], ttl)
    end
end
return redis.call('GET', KEYS[1])
"""


def _key(elicitation_id: str) -> str:
    return f"{PREFIX}elicitation:{elicitation_id}"


def _lease(elicitation_id: str) -> str:
    return f"{PREFIX}waiters:{elicitation_id}"


def _seconds(delta: timedelta) -> int:
    return max(int(delta.total_seconds()), 0) + 1


class RedisElicitations:
    def __init__(self, url: str, client: redis.Redis | None = None) -> None:
        self._redis: redis.Redis = client if client is not None else connect(url)
        # This client's own channel, named in the leases it takes. Pub/sub channels are not per database, so the
        # database is part of its name (a lease names it whole, so that only keeps it readable).
        db = self._redis.connection_pool.connection_kwargs.get("db", 0)
        self._channel = f"{PREFIX}{db}:resolutions:{secrets.token_hex(8)}"
        self._closing = False
        self._transition = self._redis.register_script(_TRANSITION)
        self._watch = self._redis.register_script(_WATCH)
        self._known: OrderedDict[str, str] = OrderedDict()

    def _remember(self, elicitation_id: str, data: str) -> None:
        self._known[elicitation_id] = data
        self._known.move_to_end(elicitation_id)
        if len(self._known) > KNOWN:
            self._known.popitem(last=False)

    async def put(self, elicitation: Elicitation) -> None:
        """Store it with this client's lease on it: the one that stores a question waits on it."""
        keep = _seconds(elicitation.expires_at - utcnow() + KEEP)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(_key(elicitation.id), _dump(elicitation), ex=keep)
            pipe.zadd(PENDING, {elicitation.id: elicitation.expires_at.timestamp()})
            pipe.sadd(_lease(elicitation.id), self._channel)
            pipe.expire(_lease(elicitation.id), keep)
            await pipe.execute()

    async def get(self, elicitation_id: str) -> Elicitation | None:
        return await self._read(elicitation_id, lambda: self._redis.get(_key(elicitation_id)))

    async def watch(self, elicitation_id: str) -> Elicitation | None:
        keys = [_key(elicitation_id), _lease(elicitation_id), PENDING]
        return await self._read(elicitation_id, lambda: self._watch(keys=keys, args=[elicitation_id, self._channel]))

    async def _read(self, elicitation_id: str, fetch: Callable[[], Awaitable[object]]) -> Elicitation | None:
        known = self._known.get(elicitation_id)
        if known is not None and (elicitation := _load(known)).state is not State.PENDING:
            return elicitation  # a terminal elicitation never changes again (nor needs a lease)
        data = cast(str | None, await fetch())  # the client decodes replies
        if data is None:
            return None
        self._remember(elicitation_id, data)
        return _load(data)

    async def transition(
        self, elicitation_id: str, state: State, answer: Answer | None, at: datetime, read: Elicitation | None = None
    ) -> bool:
        key = _key(elicitation_id)
        # What to compare against: the stored JSON as read here, else as this caller holds it (the very question
        # stored, so the same JSON), else read.
        before = self._known.get(elicitation_id)
        if before is None:
            before = _dump(read) if read is not None else cast(str | None, await self._redis.get(key))
        while before is not None:
            current = _load(before)
            if current.state is not State.PENDING:
                self._remember(elicitation_id, before)
                return False
            after = _dump(resolved(current, state, answer, at))
            args: list[str | float] = [before, after, elicitation_id, at.timestamp(), _seconds(KEEP)]
            done = await self._transition(keys=[key, PENDING, RESOLVED, _lease(elicitation_id)], args=args)
            if done == 1:
                self._remember(elicitation_id, after)
                return True
            before = (
                cast(str | None, done[0]) if done else None
            )  # changed since it was read here: judge against what is stored
        self._known.pop(elicitation_id, None)
        return False

    async def due(self, now: datetime, limit: int = 500) -> list[Elicitation]:
        ids = cast(list[str], await self._redis.zrangebyscore(PENDING, "-inf", now.timestamp(), start=0, num=limit))
        if not ids:
            return []
        found: list[Elicitation] = []
        gone: list[str] = []
        for elicitation_id, data in zip(ids, await self._redis.mget([_key(i) for i in ids]), strict=True):
            if data is None:
                gone.append(elicitation_id)  # dropped by the safety-net expiry
            elif (elicitation := _load(data)).state is State.PENDING:
                found.append(elicitation)
        if gone:
            await self._redis.zrem(PENDING, *gone)
        return found

    async def purge(self, resolved_before: datetime) -> int:
        count = 0
        while True:
            # A terminal elicitation never changes again, so reading then deleting cannot race with a writer.
            before = f"({resolved_before.timestamp()!r}"  # exclusive
            ids = cast(list[str], await self._redis.zrangebyscore(RESOLVED, "-inf", before, start=0, num=500))
            if not ids:
                return count
            for elicitation_id in ids:
                self._known.pop(elicitation_id, None)
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(*(_key(i) for i in ids))
                pipe.zrem(RESOLVED, *ids)
                await pipe.execute()
            count += len(ids)

    async def resolutions(self) -> AsyncGenerator[str | None, None]:
        pubsub = self._redis.pubsub()
        try:
            await pubsub.subscribe(self._channel)
            task = asyncio.current_task()
            while True:
                # Poll with a bounded read, and stop when our task is being cancelled: a read blocked inside
                # redis-py's listen() can swallow the cancellation and wait forever (seen at shutdown).
                if self._closing:
                    return
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError
                message = await pubsub.get_message(timeout=LISTEN_POLL_S)
                if message is None:
                    continue
                # A subscribe confirmation comes first and again after each reconnection (redis-py resubscribes).
                yield None if message["type"] == "subscribe" else str(message["data"])
        finally:
            await close_pubsub(pubsub)

    async def close(self) -> None:
        self._closing = True  # listeners stop at their next poll, even one whose cancellation was swallowed
        await bounded_close(self._redis.aclose())


def _dump(elicitation: Elicitation) -> str:
    return json.dumps(elicitation.to_json(), separators=(",", ":"))


def _load(data: str | bytes) -> Elicitation:
    return Elicitation.from_json(json.loads(data))
