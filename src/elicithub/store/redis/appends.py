"""Append notices of the Redis event logs: one subscription per hub wakes every reader here whose log another hub
appended to, instead of one blocking `XREAD` per waiting reader."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import redis.asyncio as redis

from elicithub.store.notices import Notifier
from elicithub.store.redis.client import close_pubsub

log = logging.getLogger(__name__)

LISTEN_POLL_S = 1.0


class AppendNotices:
    """Listens on the channel every append is published on; `heard(key, seq)` learns of another hub's appends and
    the waiting readers of `key` wake. After a (re)subscription `lost()` forgets what may have gone unheard and
    every reader wakes."""

    def __init__(
        self,
        client: redis.Redis,
        channel: str,
        token: str,
        heard: Callable[[str, int], None],
        lost: Callable[[], None],
    ) -> None:
        self._redis = client
        self.channel = channel
        self.token = token
        """Marks this process's own appends, which its readers learn of without the channel."""
        self.appended = Notifier()
        self._heard = heard
        self._lost = lost
        self._listening: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def listening(self) -> None:
        """Return once appends are heard (so a reader that reads after this misses no notice)."""
        if self._task is None:
            self._listening = asyncio.Event()
            self._task = asyncio.create_task(self._listen(self._listening))
        assert self._listening is not None
        await self._listening.wait()

    async def _listen(self, listening: asyncio.Event) -> None:
        while not self._closing:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                while not self._closing:
                    message = await pubsub.get_message(timeout=LISTEN_POLL_S)
                    if message is None:
                        continue
                    if message["type"] == "subscribe":  # first, and again after redis-py reconnected
                        self._lost()
                        listening.set()
                        self.appended.notify_all()
                    else:
                        self._deliver(str(message["data"]))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("listening for event log appends failed; listening again in 1 s")
                await asyncio.sleep(1)
            finally:
                await close_pubsub(pubsub)

    def _deliver(self, message: str) -> None:
        token, seq, key = message.split(" ", 2)
        if token != self.token:
            self._heard(key, int(seq))
            self.appended.notify(key)

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, LISTEN_POLL_S * 3)
            self._task = None
