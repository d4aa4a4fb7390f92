"""A generic in-process publish/subscribe bus keyed by stream id."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class EventBus(Generic[T]):
    """Delivers each event published on a key to every current subscriber of that key."""

    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[T]]] = {}

    def publish(self, key: str, event: T) -> int:
        queues = self._queues.get(key, ())
        for queue in queues:
            queue.put_nowait(event)
        return len(queues)

    def subscribers(self, key: str) -> int:
        return len(self._queues.get(key, ()))

    @asynccontextmanager
    async def subscribe(self, key: str) -> AsyncIterator[asyncio.Queue[T]]:
        queue: asyncio.Queue[T] = asyncio.Queue()
        self._queues.setdefault(key, set()).add(queue)
        try:
            yield queue
        finally:
            queues = self._queues.get(key)
            if queues is not None:
                queues.discard(queue)
                if not queues:
                    del self._queues[key]
