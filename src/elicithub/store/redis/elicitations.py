"""The Redis backend's elicitations, shared by every hub that points at it.

Keys, all under `elicithub:`: one JSON string per elicitation (`elicithub:elicitation:<id>`), a sorted set of pending
ids by deadline (`elicithub:pending`) and one of terminal ids by resolution time (`elicithub:resolved`). A transition
is a compare-and-set in one Lua script, which also publishes the id on a channel, so every hub hears it.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import AsyncGenerator
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

# KEYS: the elicitation, the pending set, the resolved set. ARGV: the JSON read before, the new JSON, the id,
# the resolution time, seconds to keep, the channel. Comparing the whole value makes this a compare-and-set:
# only a transition changes a stored elicitation, so if it is still what was read, it is still pending. When it
# is not, the script returns what is stored (nil when nothing), so the caller need not read it again.
_TRANSITION = """
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
    return {current}
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[5])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
redis.call('PUBLISH', ARGV[6], ARGV[3])
return 1
"""


def _key(elicitation_id: str) -> str:
    return f"{PREFIX}elicitation:{elicitation_id}"


def _seconds(delta: timedelta) -> int:
    return max(int(delta.total_seconds()), 0) + 1


class RedisElicitations:
    def __init__(self, url: str, client: redis.Redis | None = None) -> None:
        self._redis: redis.Redis = client if client is not None else connect(url)
        # Pub/sub channels are not per database, so the database is part of the channel's name.
        db = self._redis.connection_pool.connection_kwargs.get("db", 0)
        self._channel = f"{PREFIX}{db}:resolutions"
        self._closing = False
        self._transition = self._redis.register_script(_TRANSITION)
        self._known: OrderedDict[str, str] = OrderedDict()

    def _remember(self, elicitation_id: str, data: str) -> None:
        self._known[elicitation_id] = data
        self._known.move_to_end(elicitation_id)
        if len(self._known) > KNOWN:
            self._known.popitem(last=False)

    async def put(self, elicitation: Elicitation) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(_key(elicitation.id), _dump(elicitation), ex=_seconds(elicitation.expires_at - utcnow() + KEEP))
            pipe.zadd(PENDING, {elicitation.id: elicitation.expires_at.timestamp()})
            await pipe.execute()

    async def get(self, elicitation_id: str) -> Elicitation | None:
        known = self._known.get(elicitation_id)
        if known is not None and (elicitation := _load(known)).state is not State.PENDING:
            return elicitation
        data = cast(str | None, await self._redis.get(_key(elicitation_id)))  # the client decodes replies
        if data is None:
            return None
        self._remember(elicitation_id, data)
        return _load(data)

    async def transition(self, elicitation_id: str, state: State, answer: Answer | None, at: datetime) -> bool:
        key = _key(elicitation_id)
        before = self._known.get(elicitation_id) or cast(str | None, await self._redis.get(key))
        while before is not None:
            current = _load(before)
            if current.state is not State.PENDING:
                self._remember(elicitation_id, before)
                return False
            after = _dump(resolved(current, state, answer, at))
            args: list[str | float] = [before, after, elicitation_id, at.timestamp(), _seconds(KEEP), self._channel]
            done = await self._transition(keys=[key, PENDING, RESOLVED], args=args)
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
