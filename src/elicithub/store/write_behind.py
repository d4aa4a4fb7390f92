"""Event appends written behind: a run hands its events over without waiting, and everything handed over while
the previous write was in flight goes to the store in one write, in order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

from elicithub.core.jsoncodec import JsonMapping

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.05
RETRY_MAX_S = 2.0
CLOSE_TIMEOUT_S = 5.0

Appends = list[tuple[str, JsonMapping]]
Write = Callable[[int, Appends], Awaitable[list[int]]]
"""Store these appends, in order; their sequence numbers, in the same order. The first argument numbers the batch
(in this process), the same when a batch that failed is written again: a store may use it to store a batch once."""


class WriteBehind:
    """One writer at a time, so appends reach the store in the order they were made: while a write is in flight,
    the next appends queue up and go together in the one after it. A write that fails is logged and made again
    (with the same appends, first) until it succeeds: nothing handed over is dropped while the hub runs."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._queue: list[tuple[str, JsonMapping, asyncio.Future[int] | None]] = []
        self._writing: asyncio.Task[None] | None = None
        self._stored: dict[str, asyncio.Future[None]] = {}
        """Per key with appends not yet stored: done when its newest one is."""
        self._next: asyncio.Future[None] | None = None
        self._batches = 0

    def post(self, key: str, event: JsonMapping) -> None:
        self._enqueue(key, event, None)

    async def append(self, key: str, event: JsonMapping) -> int:
        seq: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._enqueue(key, event, seq)
        return await seq

    async def stored(self, key: str) -> None:
        """Once every append to `key` handed over so far is stored (at once when there is none)."""
        done = self._stored.get(key)
        if done is not None:
            await asyncio.shield(done)

    def _enqueue(self, key: str, event: JsonMapping, seq: asyncio.Future[int] | None) -> None:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        self._queue.append((key, event, seq))
        self._stored[key] = self._next
        if self._writing is None:
            self._writing = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        batch: list[tuple[str, JsonMapping, asyncio.Future[int] | None]] = []
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                done, self._next = self._next, None
                self._batches += 1
                seqs = await self._until_written(self._batches, [(key, event) for key, event, _ in batch])
                for (key, _, seq), number in zip(batch, seqs, strict=True):
                    if seq is not None and not seq.done():
                        seq.set_result(number)
                    if self._stored.get(key) is done:
                        del self._stored[key]
                if done is not None:
                    done.set_result(None)
                batch = []
        except asyncio.CancelledError:
            lost = len(batch) + len(self._queue)
            log.error("%d event(s) were not stored: the store closed before they could be", lost)
            for _, _, seq in [*batch, *self._queue]:
                if seq is not None:
                    seq.cancel()
            for waiting in self._stored.values():
                waiting.cancel()
            self._queue, self._stored, self._next = [], {}, None
            raise
        finally:
            self._writing = None

    async def _until_written(self, batch: int, appends: Appends) -> list[int]:
        delay = RETRY_FIRST_S
        while True:
            try:
                return await self._write(batch, appends)
            except Exception:
                log.exception("storing %d event(s) failed; trying again in %.2f s", len(appends), delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def close(self) -> None:
        """Store what is still queued (for a few seconds at most: a store that is gone loses it, and says so)."""
        writing = self._writing
        if writing is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(writing), CLOSE_TIMEOUT_S)
        except TimeoutError:
            writing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writing


class WrittenBehindLog(ABC):
    """An event log (`core.ports.EventLog`) whose appends and posts are written behind: a backend stores each
    batch (`_write`) and reads."""

    def __init__(self) -> None:
        self._behind = WriteBehind(self._write)

    async def append(self, key: str, event: JsonMapping) -> int:
        return await self._behind.append(key, event)

    def post(self, key: str, event: JsonMapping, *, followed: bool = True) -> None:
        self._behind.post(key, event)

    async def close(self) -> None:
        await self._behind.close()

    @abstractmethod
    async def _write(self, batch: int, appends: Appends) -> list[int]:
        """Store `appends` in one write, in order; their sequence numbers (see `Write`)."""
