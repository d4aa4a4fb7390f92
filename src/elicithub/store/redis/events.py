"""The Redis backend's event logs: `elicithub:events:<key>`, a stream (ids `<seq>-1`), with `events-seq:<key>`, its
counter.

Appends are written behind (`write_behind`): all those made while the previous write was in flight go in one
script call. Each append is also published to the other hubs reading that log (see `appends`), so a reader here
waits on a notice instead of a blocking read, and each hub keeps the newest events it appended or read per
conversation: a reader following a run on the hub that runs it never reads Redis (the appends take the hub's lease
on their log along).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as redis

from elicithub.core.jsoncodec import JsonMapping, JsonObject, as_object
from elicithub.store.redis.appends import APPEND_LEASE_S, LEASE, PUBLISH, AppendNotices, watch_key
from elicithub.store.redis.client import PREFIX
from elicithub.store.write_behind import Appends, WrittenBehindLog

KEPT_PER_CONVERSATION = 256
KEPT_CONVERSATIONS = 10_000

BATCH_KEPT_S = 300
"""How long Redis remembers a batch of appends it stored, so a batch sent again (its reply was lost) is not
stored twice."""

# KEYS: the batch's marker, then per log: its stream, its counter, its watch hash. ARGV: the bound, seconds kept,
# the channels' prefix, this hub's token, the lease in ms, then per log: its key, '1' to take this hub's lease
# along, how many events, the events' JSON. Returns each log's newest seq; a batch already stored returns the
# same again.
_APPEND = (
    LEASE
    + PUBLISH
    + """
local stored = redis.call('GET', KEYS[1])
if stored then
    return cjson.decode(stored)
end
for i = 2, #KEYS, 3 do
    -- A script is not undone when it fails: refuse the whole batch before writing anything.
    local stream, counter = redis.call('TYPE', KEYS[i])['ok'], redis.call('TYPE', KEYS[i + 1])['ok']
    if (stream ~= 'none' and stream ~= 'stream') or (counter ~= 'none' and counter ~= 'string') then
        return redis.error_reply('WRONGTYPE the event log ' .. KEYS[i] .. ' holds another kind of value')
    end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local tops = {}
local a = 6
for i = 1, (#KEYS - 1) / 3 do
    local stream, counter, watch = KEYS[3 * i - 1], KEYS[3 * i], KEYS[3 * i + 1]
    local n = tonumber(ARGV[a + 2])
    local top = redis.call('INCRBY', counter, n)
    for j = 1, n do
        redis.call('XADD', stream, 'MAXLEN', '~', ARGV[1], (top - n + j) .. '-1', 'e', ARGV[a + 2 + j])
    end
    redis.call('EXPIRE', stream, ARGV[2])
    redis.call('EXPIRE', counter, ARGV[2])
    if ARGV[a + 1] == '1' then
        lease(watch, ARGV[4], tonumber(ARGV[5]), now)
    end
    publish(watch, top, ARGV[a], now)
    tops[i] = top
    a = a + 3 + n
end
redis.call('SET', KEYS[1], cjson.encode(tops), 'EX', """
    + str(BATCH_KEPT_S)
    + """)
return tops
"""
)


@dataclass
class _Tail:
    """A conversation's newest events known here: every one after `base` up to `top` is in `events`; `known` is the
    newest seq heard of (by any hub), so the tail answers a read only when `top` has caught up with it; `at`: when
    it last took an event (unix seconds)."""

    base: int
    top: int
    known: int
    events: deque[tuple[int, JsonObject]] = field(default_factory=deque)
    at: float = field(default_factory=time.time)

    def add(self, seq: int, event: JsonObject, kept: int) -> None:
        self.at = time.time()
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


class RedisEvents(WrittenBehindLog):
    """A Redis stream per conversation, so a reader on any hub follows a run going on at any other."""

    def __init__(self, client: redis.Redis, url: str, max_len: int, retention_s: float) -> None:
        super().__init__()
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
        self._lease_along: set[str] = set()
        """Logs with a post waiting to be written that readers here are likely to follow."""

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

    def _lapsed(self, key: str, top: int | None) -> None:
        """What is kept of `key` may miss appends made elsewhere: start over, from `top` when that is known to be
        the log's newest seq. Whatever was heard of or kept beyond it still counts as known, so an own append
        whose reply came first is read back from Redis rather than missed."""
        old = self._tails.pop(key, None)
        if top is not None:
            self._new_tail(key, top).known = max(top, old.top, old.known) if old is not None else top

    def forget_idle(self, idle_before: float) -> None:
        """Let go of what is kept of the logs that took no event here since `idle_before` (unix seconds): Redis
        forgets a log `retention_s` after its last append, and a hub's memory of it lasts no longer."""
        for key in [key for key, tail in self._tails.items() if tail.at < idle_before]:
            del self._tails[key]
        self._notices.forget_lapsed()

    def post(self, key: str, event: JsonMapping, *, followed: bool = True) -> None:
        if followed:
            self._notices.start()
            self._lease_along.add(key)
        super().post(key, event)

    async def _write(self, batch: int, appends: Appends) -> list[int]:
        """One script call for the batch: each log's events in order, numbered by its counter, with this hub's
        lease taken along on each log that readers here are likely to follow, where it is due (those readers then
        need no lease of their own). A hub that only announces an answer on another hub's run takes none, so it is
        not told of that run's appends."""
        by_key: dict[str, list[JsonObject]] = {}
        for key, event in appends:
            by_key.setdefault(key, []).append(as_object(event))
        keys = [f"{PREFIX}appended:{self._notices.token}:{batch}"]
        args: list[str | int] = [
            self._max_len,
            self._retention_s,
            self._notices.prefix,
            self._notices.token,
            int(APPEND_LEASE_S * 1000),
        ]
        leased = []
        for key, events in by_key.items():
            keys.extend([*self._keys(key), watch_key(key)])
            lease = key in self._lease_along and self._notices.renews(key)
            self._lease_along.discard(key)
            if lease:
                leased.append(key)
            args.extend([key, int(lease), len(events), *(json.dumps(e, separators=(",", ":")) for e in events)])
        since = asyncio.get_running_loop().time()
        tops = [int(top) for top in await self._append(keys=keys, args=args)]
        for key in leased:
            self._notices.renewed(key, since)
        seqs: dict[str, int] = {}
        for (key, events), top in zip(by_key.items(), tops, strict=True):
            seqs[key] = top - len(events)
            kept = self._tails.get(key)
            if kept is not None and seqs[key] < kept.top:  # Redis let the log lapse and it starts over: a new log
                del self._tails[key]
            self._remember(key, [(top - len(events) + i, event) for i, event in enumerate(events, 1)])
            self._notices.appended.notify(key)
        numbered = []
        for key, _ in appends:
            seqs[key] += 1
            numbered.append(seqs[key])
        return numbered

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
        await self._behind.stored(key)  # its write may take the lease along, sparing the one watch would take
        await self._notices.watch(key, self._keys(key)[1], timeout_s)
        return await self._notices.appended.wait_for(key, lambda: self.read(key, after, limit), timeout_s)

    async def last(self, key: str) -> int:
        await self._behind.stored(key)
        tail = self._tail(key)
        if tail is not None and tail.top >= tail.known and self._notices.holds(key):
            return tail.top  # every append made elsewhere since the lease would have been heard
        value = await self._redis.get(self._keys(key)[1])
        return int(value or 0)

    async def close(self) -> None:
        await super().close()
        await self._notices.close()


def _decoded(entries: Any) -> list[tuple[int, JsonObject]]:
    return [(int(str(entry_id).split("-", 1)[0]), json.loads(fields["e"])) for entry_id, fields in entries]
