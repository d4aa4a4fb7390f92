"""The Redis backend's casts: PUBLISHed on one channel, `elicithub:<db>:casts`, that every hub sharing the database
subscribes to on a connection of its own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import redis.asyncio as redis
from redis.asyncio.client import PubSub

from elicithub.store.casts import CastSender, deliver
from elicithub.store.redis.client import PREFIX, close_pubsub

log = logging.getLogger(__name__)

LISTEN_POLL_S = 1.0
RETRY_S = 1.0


class RedisCasts:
    """Casts queued in one turn of the loop go out in one pipeline; one task reads the subscription. redis-py
    connects again and resubscribes after a lost connection; when it gives up, the task subscribes anew."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        # Pub/sub channels are not per database, so the database is part of the channel's name.
        db = client.connection_pool.connection_kwargs.get("db", 0)
        self._channel = f"{PREFIX}{db}:casts"
        self._sender = CastSender(self._publish)
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def send(self, message: str) -> None:
        self._sender.send(message)

    async def _publish(self, messages: list[str]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            for message in messages:
                pipe.publish(self._channel, message)
            await pipe.execute()

    async def listen(self, handler: Callable[[str], None]) -> None:
        """Returns once Redis confirmed the subscription; raises when it cannot be made."""
        pubsub = await self._subscribed()
        self._task = asyncio.create_task(self._receive(pubsub, handler), name="redis-casts")

    async def _subscribed(self) -> PubSub:
        pubsub = self._redis.pubsub()
        try:
            await pubsub.subscribe(self._channel)
            # Messages published after Redis took the subscription come after its confirmation.
            while True:
                message = await pubsub.get_message(timeout=LISTEN_POLL_S)
                if message is not None and message["type"] == "subscribe":
                    return pubsub
        except BaseException:
            await close_pubsub(pubsub)
            raise

    async def _receive(self, subscribed: PubSub, handler: Callable[[str], None]) -> None:
        pubsub: PubSub | None = subscribed
        while not self._closing:
            try:
                if pubsub is None:
                    pubsub = await self._subscribed()
                # Poll with a bounded read, so the task sees it is closing even if redis-py swallowed a cancellation.
                while not self._closing:
                    message = await pubsub.get_message(timeout=LISTEN_POLL_S)
                    if message is not None and message["type"] == "message":
                        deliver(handler, str(message["data"]))
                return
            except Exception:
                log.exception("listening for casts failed; subscribing again in %.0f s", RETRY_S)
            finally:
                if pubsub is not None:
                    await close_pubsub(pubsub)
                pubsub = None
            await asyncio.sleep(RETRY_S)

    async def close(self) -> None:
        self._closing = True
        await self._sender.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, LISTEN_POLL_S * 3)
            self._task = None
