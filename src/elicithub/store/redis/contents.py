"""The Redis store's whole content for `elicithub store copy` (see store/contents.py). Each key under `elicithub:` is
of a kind named below, copied or not, and a key of any other kind stops the copy. Redis has no moment to read
from as the databases do, so the hubs must be stopped: a source where a hub still beats is refused.

A record written here lives as long as a hub's own write would keep it, counted from the copy: a conversation and
its log `retention_s`, a finished run a day, a question a week past its deadline or end."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

import redis.asyncio as redis

from elicithub.core.jsoncodec import JsonObject, dumps
from elicithub.errors import StoreUnusable
from elicithub.store.contents import (
    BATCH,
    StoredConversation,
    StoredElicitation,
    StoredList,
    StoredLog,
    StoredRecord,
    StoredRun,
    StoredValue,
    unknown,
)
from elicithub.store.redis import SAFE_POLICY
from elicithub.store.redis.client import PREFIX
from elicithub.store.redis.elicitations import KEEP
from elicithub.store.redis.kv import entry_of, member_of
from elicithub.store.redis.runs import FINISHED_TTL_S

COPIED = ("elicitation", "run", "conversation", "events-seq", "vault", "entries")
"""Kinds of key read as records: a question, a run, a conversation, an event log (its counter), a key-value entry,
a list of expiring entries."""
JOINED = ("run-owner", "conversation-messages", "events")
"""Kinds read along with the record they belong to: a run's owner, a conversation's messages, an event log's
stream."""
INDEXES = ("pending", "resolved", "runs")
"""Kinds the target makes again from the records: the pending and the ended questions, the unfinished runs."""
LEFT = ("alive", "waiters", "watch", "appended", "holds")
"""Kinds that belong to hubs, which are stopped: their heartbeats, the leases by which they hear a question's end or
a log's appends, and the marks of the batches they appended; and the limits' counts, which start over on the new
store."""
KINDS = (*COPIED, *JOINED, *INDEXES, *LEFT)

T = TypeVar("T")

LOGS_AT_ONCE = 20
"""Event logs read in one round trip: each keeps up to `conversations.max_events` events."""
PUSHED_AT_ONCE = 1000


async def open_redis_contents(url: str, *, target: bool, retention_s: float) -> RedisContents:
    """A target must not evict keys: records would vanish as the copy fills it (a hub refuses it too)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        policy = (await client.info("memory")).get("maxmemory_policy")
    except (OSError, redis.RedisError) as exc:
        await client.aclose()
        raise StoreUnusable(f"cannot connect to the Redis store at {url}: {exc}") from exc
    if target and policy != SAFE_POLICY:
        await client.aclose()
        raise StoreUnusable(
            f"the Redis store at {url} may evict keys (maxmemory-policy is {policy or 'unknown'}), losing what is "
            f"copied: set maxmemory-policy {SAFE_POLICY} on the Redis server first"
        )
    return RedisContents(client, url, retention_s)


class RedisContents:
    def __init__(self, client: redis.Redis, url: str, retention_s: float) -> None:
        self._redis = client
        self._where = url
        self._retention_s = max(int(retention_s), 1)
        self._keys: dict[str, list[str]] = {}
        """The keys found, by kind, each without `elicithub:KIND:`."""

    async def check(self) -> None:
        found = await self._scan()
        strange = [f"{PREFIX}{kind}:*" for kind in found if kind not in KINDS]
        if strange:
            raise StoreUnusable(unknown(strange, self._where))
        if found.get("alive"):
            hubs = ", ".join(found["alive"])
            raise StoreUnusable(f"hubs still use the store (instances {hubs}): stop every hub first")
        # A log is its counter and its stream, which expire together: either one found is the log.
        found["events-seq"] = sorted({*found.get("events-seq", ()), *found.get("events", ())})
        self._keys = found

    async def _scan(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        async for key in self._redis.scan_iter(match=f"{PREFIX}*", count=1000):
            kind, _, rest = str(key).removeprefix(PREFIX).partition(":")
            found.setdefault(kind, []).append(rest)
        return found

    async def count(self) -> int:
        return sum(len(self._keys.get(kind, ())) for kind in COPIED)

    async def read(self) -> AsyncIterator[Sequence[StoredRecord]]:
        for ids in _chunks(self._keys.get("elicitation", []), BATCH):
            found = await self._redis.mget([f"{PREFIX}elicitation:{i}" for i in ids])
            yield [StoredElicitation(_loads(data)) for data in found if data is not None]
        for ids in _chunks(self._keys.get("run", []), BATCH):
            runs = await self._redis.mget([f"{PREFIX}run:{i}" for i in ids])
            owners = await self._redis.mget([f"{PREFIX}run-owner:{i}" for i in ids])
            yield [
                StoredRun({**_loads(data), "owner": owner or ""})
                for data, owner in zip(runs, owners, strict=True)
                if data is not None
            ]
        for keys in _chunks(self._keys.get("conversation", []), BATCH):
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hgetall(f"{PREFIX}conversation:{key}")
                    pipe.lrange(f"{PREFIX}conversation-messages:{key}", 0, -1)
                replies = await pipe.execute()
            yield [
                StoredConversation(key, {**_loads(fields["data"]), "version": int(fields["version"])}, messages)
                for key, fields, messages in zip(keys, replies[::2], replies[1::2], strict=True)
                if fields
            ]
        for keys in _chunks(self._keys.get("events-seq", []), LOGS_AT_ONCE):
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.get(f"{PREFIX}events-seq:{key}")
                    pipe.xrange(f"{PREFIX}events:{key}")
                replies = await pipe.execute()
            logs = []
            for key, last, stream in zip(keys, replies[::2], replies[1::2], strict=True):
                events = [(int(str(entry_id).split("-", 1)[0]), fields["e"]) for entry_id, fields in stream]
                if last is not None or events:
                    logs.append(StoredLog(key, int(last or events[-1][0]), events))
            yield logs
        for keys in _chunks(self._keys.get("vault", []), BATCH):
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.get(f"{PREFIX}vault:{key}")
                    pipe.pttl(f"{PREFIX}vault:{key}")
                replies = await pipe.execute()
            now = time.time()
            yield [
                StoredValue(key, base64.b64decode(value), None if ttl_ms < 0 else now + ttl_ms / 1000)
                for key, value, ttl_ms in zip(keys, replies[::2], replies[1::2], strict=True)
                if value is not None
            ]
        for keys in _chunks(self._keys.get("entries", []), BATCH):
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.zrange(f"{PREFIX}entries:{key}", 0, -1)
                replies = await pipe.execute()
            now_ms = int(time.time() * 1000)
            lists = [
                StoredList(key, [entry for entry in map(entry_of, members) if entry.expires_ms > now_ms])
                for key, members in zip(keys, replies, strict=True)
            ]
            yield [found for found in lists if found.entries]

    async def held(self) -> str | None:
        found = await self._scan()
        count = sum(len(keys) for keys in found.values())
        return f"{count} keys under {PREFIX}" if count else None

    async def write(self, records: Sequence[StoredRecord]) -> None:
        now = time.time()
        async with self._redis.pipeline(transaction=False) as pipe:
            for record in records:
                self._write(pipe, record, now)
            await pipe.execute()

    def _write(self, pipe: Any, record: StoredRecord, now: float) -> None:
        keep = self._retention_s
        if isinstance(record, StoredElicitation):
            key = f"{PREFIX}elicitation:{record.id}"
            if record.pending:
                pipe.set(key, dumps(record.data), ex=_seconds(record.expires_at + KEEP.total_seconds() - now))
                pipe.zadd(f"{PREFIX}pending", {record.id: record.expires_at})
            else:
                resolved_at = record.resolved_at or now
                pipe.set(key, dumps(record.data), ex=_seconds(resolved_at + KEEP.total_seconds() - now))
                pipe.zadd(f"{PREFIX}resolved", {record.id: resolved_at})
        elif isinstance(record, StoredRun):
            run, owner = f"{PREFIX}run:{record.id}", f"{PREFIX}run-owner:{record.id}"
            ttl = FINISHED_TTL_S if record.finished else None
            pipe.set(run, dumps(record.data), ex=ttl)
            pipe.set(owner, record.data["owner"], ex=ttl)
            if not record.finished:
                pipe.sadd(f"{PREFIX}runs:unfinished", record.id)
        elif isinstance(record, StoredConversation):
            conversation, messages = f"{PREFIX}conversation:{record.key}", f"{PREFIX}conversation-messages:{record.key}"
            pipe.hset(conversation, mapping={"version": record.version, "data": dumps(record.data)})
            for chunk in _chunks(record.messages, PUSHED_AT_ONCE):
                pipe.rpush(messages, *chunk)
            pipe.expire(conversation, keep)
            pipe.expire(messages, keep)
        elif isinstance(record, StoredLog):
            stream, counter = f"{PREFIX}events:{record.key}", f"{PREFIX}events-seq:{record.key}"
            for seq, data in record.events:
                pipe.xadd(stream, {"e": data}, id=f"{seq}-1")
            pipe.set(counter, record.last, ex=keep)
            pipe.expire(stream, keep)
        elif isinstance(record, StoredValue):
            value = base64.b64encode(record.value).decode()
            if record.expires_at is None:
                pipe.set(f"{PREFIX}vault:{record.key}", value)
            elif record.expires_at > now:
                pipe.set(f"{PREFIX}vault:{record.key}", value, px=max(1, int((record.expires_at - now) * 1000)))
        else:
            now_ms = int(now * 1000)
            kept = [entry for entry in record.entries if entry.expires_ms > now_ms]
            if kept:
                pipe.zadd(f"{PREFIX}entries:{record.key}", {member_of(entry): 0 for entry in kept})
                pipe.pexpire(f"{PREFIX}entries:{record.key}", max(e.expires_ms for e in kept) - now_ms)

    async def close(self) -> None:
        await self._redis.aclose()


def _loads(data: str | bytes) -> JsonObject:
    loaded: JsonObject = json.loads(data)
    return loaded


def _seconds(seconds: float) -> int:
    """A lifetime for EXPIRE: whole seconds, at least one."""
    return max(int(seconds), 0) + 1


def _chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
