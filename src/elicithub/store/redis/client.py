"""The Redis backend's connection: one client over a blocking pool, the key prefix, and closing that never hangs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable

import redis.asyncio as redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from elicithub.store.redis.batching import Batching

log = logging.getLogger(__name__)

PREFIX = "elicithub:"
MAX_CONNECTIONS = 64
CLOSE_TIMEOUT_S = 2.0


def connect(url: str, max_connections: int = MAX_CONNECTIONS) -> redis.Redis:
    """A batching client (see `batching`) over a blocking pool: past its size a command waits for a free
    connection instead of failing at once. The retry policy is the one a plain redis.Redis client has; a pool made
    apart from the client has none."""
    retry = Retry(ExponentialWithJitterBackoff(base=0.01, cap=1), 10)
    pool = redis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, decode_responses=True, retry=retry
    )
    return Batching.from_pool(pool)


async def bounded_close(closing: Awaitable[object]) -> None:
    """Closing a redis-py connection can wait forever for the socket (redis/redis-py#3941): never more than 2 s."""
    try:
        await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
    except (TimeoutError, OSError, redis.RedisError):
        log.warning("closing a Redis connection did not finish cleanly; dropped it")


async def close_pubsub(pubsub: PubSub) -> None:
    connection = pubsub.connection
    if connection is not None:
        # Drop the socket without waiting for it to close: the wait is where redis-py can hang.
        with contextlib.suppress(OSError, redis.RedisError):
            await connection.disconnect(nowait=True)
    await bounded_close(pubsub.aclose())  # type: ignore[no-untyped-call]
