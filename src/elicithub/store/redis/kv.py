"""The Redis backend's key-value entries: `elicithub:vault:<key>` (the prefix from when the vault was its one user);
its lists of expiring entries: `elicithub:entries:<key>`; its sets of held members: `elicithub:holds:<key>`."""

from __future__ import annotations

import base64
import time
from typing import cast

import redis.asyncio as redis

from elicithub.core.ports import Entry, Held
from elicithub.store.redis.client import PREFIX

DIGITS = 15
"""An entry's expiry (unix ms) as a member's fixed-width prefix: sorted as text, members sort by expiry, then value."""

# KEYS: the list. ARGV: the entry as a member, the first expiry (ms, as a member's prefix) still kept, the entry's
# lifetime in ms. Removes the list's expired entries, adds this one, and keeps the list as long as its newest entry.
_ADD = """
redis.call('ZREMRANGEBYLEX', KEYS[1], '-', '(' .. ARGV[2])
redis.call('ZADD', KEYS[1], 0, ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
"""

# KEYS: the set. ARGV: the member, now (ms), when its hold ends (ms), the limit (-1: none). A sorted set scored by when
# each member lapses: those lapsed are removed, the member held if there is room, and the set kept as long as its
# last member. Returns whether it was taken, how many the set holds, and when the first lapses.
_HOLD = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local limit = tonumber(ARGV[4])
local taken = 0
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or limit < 0 or redis.call('ZCARD', KEYS[1]) < limit then
    redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
    redis.call('PEXPIREAT', KEYS[1], redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
    taken = 1
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {taken, redis.call('ZCARD', KEYS[1]), first[2] or '0'}
"""


class RedisKv:
    """Entries base64 in Redis (the client decodes replies as text), expiry by Redis itself. A list is a sorted set
    whose members all score 0, each `<expiry>:<value>`, so that it reads in order by member (`ZRANGEBYLEX`)."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._add = client.register_script(_ADD)
        self._hold = client.register_script(_HOLD)

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

    async def add_entry(self, key: str, value: str, ttl_s: float) -> None:
        now_ms, ttl_ms = int(time.time() * 1000), int(ttl_s * 1000)
        member, kept = member_of(Entry(now_ms + ttl_ms, value)), f"{now_ms + 1:0{DIGITS}d}"
        await self._add(keys=[f"{PREFIX}entries:{key}"], args=[member, kept, max(1, ttl_ms)])

    async def entries(self, key: str, limit: int, before: Entry | None = None) -> list[Entry]:
        newest = "+" if before is None else f"({member_of(before)}"
        oldest = f"[{int(time.time() * 1000) + 1:0{DIGITS}d}"
        members = cast(list[str], await self._redis.zrevrangebylex(f"{PREFIX}entries:{key}", newest, oldest, 0, limit))
        return [entry_of(member) for member in members]

    async def hold(self, key: str, member: str, ttl_s: float, limit: int | None = None) -> Held:
        now_ms = int(time.time() * 1000)
        args: list[str | int] = [member, now_ms, now_ms + max(1, int(ttl_s * 1000)), -1 if limit is None else limit]
        taken, count, first = await self._hold(keys=[f"{PREFIX}holds:{key}"], args=args)
        return Held(bool(taken), int(count), int(float(first)))

    async def release(self, key: str, member: str) -> None:
        await self._redis.zrem(f"{PREFIX}holds:{key}", member)

    async def holding(self, key: str) -> Held:
        lapsed = f"({int(time.time() * 1000)}"
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zcount(f"{PREFIX}holds:{key}", lapsed, "+inf")
            pipe.zrangebyscore(f"{PREFIX}holds:{key}", lapsed, "+inf", start=0, num=1, withscores=True)
            count, first = await pipe.execute()
        return Held(False, int(count), int(first[0][1]) if first else 0)


def member_of(entry: Entry) -> str:
    """How the list holds an entry."""
    return f"{entry.expires_ms:0{DIGITS}d}:{entry.value}"


def entry_of(member: str) -> Entry:
    expires_ms, value = member.split(":", 1)
    return Entry(int(expires_ms), value)
