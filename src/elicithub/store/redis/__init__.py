"""The scale-out backend: every record kind in one Redis database, shared by every hub that points at it."""

from __future__ import annotations

from elicithub.store.redis.client import connect
from elicithub.store.redis.conversations import RedisConversations
from elicithub.store.redis.elicitations import RedisElicitations
from elicithub.store.redis.events import RedisEvents
from elicithub.store.redis.kv import RedisKv
from elicithub.store.redis.runs import RedisRuns


class RedisBackend:
    """Every record kind in one Redis database, over one pool (plus one for blocking stream reads)."""

    shared = True
    durable = True

    def __init__(self, url: str, events_max_len: int = 1000, retention_s: float = 7 * 24 * 3600) -> None:
        self.url = url
        self._redis = connect(url)
        self.elicitations = RedisElicitations(url, self._redis)
        self.runs = RedisRuns(self._redis)
        self.conversations = RedisConversations(self._redis, retention_s)
        self.kv = RedisKv(self._redis)
        self.events = RedisEvents(self._redis, url, events_max_len, retention_s)

    async def close(self) -> None:
        await self.events.close()
        await self.elicitations.close()
