"""The scale-out backend: every record kind in one Redis database, shared by every hub that points at it."""

from __future__ import annotations

from elicithub.errors import StoreUnusable
from elicithub.store.redis.casts import RedisCasts
from elicithub.store.redis.client import connect
from elicithub.store.redis.conversations import RedisConversations
from elicithub.store.redis.elicitations import RedisElicitations
from elicithub.store.redis.events import RedisEvents
from elicithub.store.redis.kv import RedisKv
from elicithub.store.redis.runs import RedisRuns

SAFE_POLICY = "noeviction"
"""The one `maxmemory-policy` under which Redis never drops a key to make room (volatile-* drop keys with a TTL,
and most of the hub's keys have one)."""


class RedisBackend:
    """Every record kind in one Redis database, over one pool (plus one for blocking stream reads)."""

    shared = True
    durable = True

    def __init__(
        self, url: str, events_max_len: int = 1000, retention_s: float = 7 * 24 * 3600, allow_eviction: bool = False
    ) -> None:
        self.url = url
        self._redis = connect(url)
        self._allow_eviction = allow_eviction
        self.elicitations = RedisElicitations(url, self._redis)
        self.runs = RedisRuns(self._redis, retention_s)
        self.events = RedisEvents(self._redis, url, events_max_len, retention_s)
        self.conversations = RedisConversations(self._redis, retention_s, self.events)
        self.kv = RedisKv(self._redis)
        self.casts = RedisCasts(self._redis)

    async def open(self) -> None:
        """Refuse a Redis that may evict keys: a pending question or a token would vanish without a trace."""
        if self._allow_eviction:
            return
        # INFO, not CONFIG GET: managed services that disable CONFIG still answer it.
        policy = (await self._redis.info("memory")).get("maxmemory_policy")
        if policy != SAFE_POLICY:
            raise StoreUnusable(
                f"the Redis store may evict keys (maxmemory-policy is {policy or 'unknown'}), losing pending "
                f"questions and stored tokens: set maxmemory-policy {SAFE_POLICY} on the Redis server, or set "
                "store.allow_eviction: true to accept that loss"
            )

    async def ready(self) -> str | None:
        try:
            await self._redis.ping()
        except Exception as exc:
            return f"the Redis store does not answer: {type(exc).__name__}"
        return None

    async def close(self) -> None:
        await self.casts.close()  # first: the client it sends on closes with the elicitations
        await self.events.close()
        await self.elicitations.close()
