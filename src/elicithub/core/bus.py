"""A generic in-process publish/subscribe bus keyed by stream id."""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class EventBus(Generic[T]):
    """Delivers each event published on a key to every current subscriber of that key.

    With `history`, the last events of the most recent keys are kept, numbered, so a follower can catch up
    from where it left off (an SSE `Last-Event-ID`).
    """

    def __init__(self, *, history: int = 0, keys: int = 1000) -> None:
        self._queues: dict[str, set[asyncio.Queue[T]]] = {}
        self._followers: dict[str, set[asyncio.Queue[tuple[int, T]]]] = {}
        self._history: OrderedDict[str, deque[tuple[int, T]]] = OrderedDict()
        self._seq: dict[str, int] = {}
        self._history_len = history
        self._history_keys = keys

    def publish(self, key: str, event: T) -> int:
        queues = self._queues.get(key, ())
        for queue in queues:
            queue.put_nowait(event)
        if self._history_len:
            seq = self._seq.get(key, 0) + 1
            self._seq[key] = seq
            kept = self._history.get(key)
            if kept is None:
                kept = self._history[key] = deque(maxlen=self._history_len)
                if len(self._history) > self._history_keys:
                    old, _ = self._history.popitem(last=False)
                    self._seq.pop(old, None)
            self._history.move_to_end(key)
            kept.append((seq, event))
            for follower in self._followers.get(key, ()):
                follower.put_nowait((seq, event))
        return len(queues)

    def kept(self, key: str, after: int | None = None) -> list[tuple[int, T]]:
        return [(seq, event) for seq, event in self._history.get(key, ()) if after is None or seq > after]

    @asynccontextmanager
    async def follow(self, key: str, after: int | None = None) -> AsyncIterator[asyncio.Queue[tuple[int, T]]]:
        """Numbered events of `key`: the kept ones after `after` (all kept ones for None), then new ones."""
        queue: asyncio.Queue[tuple[int, T]] = asyncio.Queue()
        for item in self.kept(key, after):
            queue.put_nowait(item)
        self._followers.setdefault(key, set()).add(queue)
        try:
            yield queue
        finally:
            followers = self._followers.get(key)
            if followers is not None:
                followers.discard(queue)
                if not followers:
                    del self._followers[key]

    def subscribers(self, key: str) -> int:
        return len(self._queues.get(key, ()))

    def followers(self, key: str) -> int:
        return len(self._followers.get(key, ()))

    def total_subscribers(self) -> int:
        return sum(len(queues) for queues in self._queues.values())

    def total_followers(self) -> int:
        return sum(len(queues) for queues in self._followers.values())

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
