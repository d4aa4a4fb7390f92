"""The Redis backend's event logs: `elicithub:events:<key>`, a stream (ids `<seq>-1`), with `events-seq:<key>`, its
counter.

Each append is also published to the other hubs reading that log (see `appends`), so a reader here waits on a
notice instead of a blocking read, and each hub keeps the newest events it appended or read per conversation: a
reader following a run on the hub that runs it never reads Redis.
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as redis

from elicithub.core.jsonwire import JsonObject
from elicithub.store.redis.appends import PUBLISH, AppendNotices, watch_key
from elicithub.store.redis.client import PREFIX

KEPT_PER_CONVERSATION = 256
KEPT_CONVERSATIONS = 10_000

# KEYS: the stream, its counter, its watch hash. ARGV: the event JSON, the bound, seconds kept, then what PUBLISH
# reads.
_APPEND = (
    """
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], seq .. '-1', 'e', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
"""
    + PUBLISH
    + """
return seq
"""
)


@dataclass
class _Tail:
    """A conversation's newest events known here: every one after `base` up to `top` is in `events`; `known` is the
    newest seq heard of (by any hub), so the tail answers a read only when `top` has caught up with it."""

    base: int
    top: int
    known: int
    events: deque[tuple[int, JsonObject]] = field(default_factory=deque)

    def add(self, seq: int, event: JsonObject, kept: int) -> None:
        self.known = max(self.known, seq)
        if seq <= self.top:
            return
        if seq != self.top + 1:  # another hub's append came between: start over from here
            self.events.clear()
            self.base = seq - 1
        self.events.append((seq, event))
        self.top = seq
        if len(self.events) > kept:
            self.base = self.events.popleft()[0]


class RedisEvents:
    """A Redis stream per conversation, so a reader on any hub follows a run going on at any other."""

    def __init__(self, client: redis.Redis, url: str, max_len: int, retention_s: float) -> None:
        self._redis = client
        self._append = client.register_script(_APPEND)
        self._max_len = max_len
        self._retention_s = max(int(retention_s), 1)
        self._kept = min(KEPT_PER_CONVERSATION, max_len)
        self._tails: OrderedDict[str, _Tail] = OrderedDict()
        # Pub/sub channels are not per database, so the database is part of the channel's name.
        db = client.connection_pool.connection_kwargs.get("db", 0)
        self._notices = AppendNotices(
            client, f"{PREFIX}{db}:appends:", secrets.token_hex(8), self._heard, self._lapsed, self._tails.clear
        )

    @staticmethod
    def _keys(key: str) -> tuple[str, str]:
        return f"{PREFIX}events:{key}", f"{PREFIX}events-seq:{key}"

    def _tail(self, key: str) -> _Tail | None:
        tail = self._tails.get(key)
        if tail is not None:
            self._tails.move_to_end(key)
        return tail

    def _new_tail(self, key: str, top: int) -> _Tail:
        tail = self._tails[key] = _Tail(top, top, 0)
        if len(self._tails) > KEPT_CONVERSATIONS:
            self._tails.popitem(last=False)
        return tail

    def _remember(self, key: str, found: list[tuple[int, JsonObject]]) -> None:
        tail = self._tail(key) or self._new_tail(key, found[0][0] - 1)
        for seq, event in found:
            tail.add(seq, event, self._kept)

    def _heard(self, key: str, seq: int) -> None:
        """Another hub appended `seq` to `key`: what is kept here of `key` no longer reaches its end. Noted even
        when nothing is kept yet, for this hub's own append in flight may start keeping it from below `seq`."""
        tail = self._tail(key) or self._new_tail(key, 0)
        tail.known = max(tail.known, seq)

    def _lapsed(self, key: str) -> None:
        self._tails.pop(key, None)

    async def append(self, key: str, event: JsonObject) -> int:
        data = json.dumps(event, separators=(",", ":"))
        args: list[str | int] = [
            data,
            self._max_len,
            self._retention_s,
            self._notices.prefix,
            self._notices.token,
            key,
        ]
        seq = int(await self._append(keys=[*self._keys(key), watch_key(key)], args=args))
        self._remember(key, [(seq, event)])
        self._notices.appended.notify(key)
        return seq

    async def read(self, key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        tail = self._tail(key)
        if tail is not None and tail.base <= after and tail.top >= tail.known:
            return [item for item in tail.events if item[0] > after][:limit]
        entries = await self._redis.xrange(self._keys(key)[0], min=f"({after}-1", count=limit)
        found = _decoded(entries)
        if found and tail is not None and found[0][0] <= tail.top + 1:
            self._remember(key, found)  # what this hub missed, joined on to what it had
        return found

    async def wait(self, key: str, after: int, timeout_s: float, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        await self._notices.watch(key, timeout_s)
        return await self._notices.appended.wait_for(key, lambda: self.read(key, after, limit), timeout_s)

    async def last(self, key: str) -> int:
        value = await self._redis.get(self._keys(key)[1])
        return int(value or 0)

    async def close(self) -> None:
        await self._notices.close()


def _decoded(entries: Any) -> list[tuple[int, JsonObject]]:
    return [(int(str(entry_id).split("-", 1)[0]), json.loads(fields["e"])) for entry_id, fields in entries]
