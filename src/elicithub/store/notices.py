"""What the backends share: in-process resolution notices and append notices for stores of one process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeVar

from elicithub.core.bus import EventBus

T = TypeVar("T")


class LocalResolutions:
    """The resolution notices of a store that lives in one process: its own transitions, to its own listeners."""

    def __init__(self) -> None:
        self._bus: EventBus[str] = EventBus()

    def announce(self, elicitation_id: str) -> None:
        self._bus.publish("resolved", elicitation_id)

    async def listen(self) -> AsyncGenerator[str | None, None]:
        async with self._bus.subscribe("resolved") as queue:
            yield None
            while True:
                yield await queue.get()


class Notifier:
    """Wakes the readers waiting on a key when something is appended to it (within one process)."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}

    def notify(self, key: str) -> None:
        for event in self._waiting.get(key, ()):
            event.set()

    def notify_all(self) -> None:
        """Wake every reader: what was appended may have gone unheard (a lost connection)."""
        for events in self._waiting.values():
            for event in events:
                event.set()

    async def wait_for(self, key: str, read: Callable[[], Awaitable[list[T]]], timeout_s: float) -> list[T]:
        """`read()` once it has something, reading again after each notice on `key`, for up to `timeout_s`."""
        event = asyncio.Event()
        waiting = self._waiting.setdefault(key, set())
        waiting.add(event)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while True:
                event.clear()
                found = await read()
                remaining = deadline - loop.time()
                if found or remaining <= 0:
                    return found
                try:
                    async with asyncio.timeout(remaining):  # no task per wait, as asyncio.wait_for makes in 3.11
                        await event.wait()
                except TimeoutError:
                    return await read()
        finally:
            waiting.discard(event)
            if not waiting:
                self._waiting.pop(key, None)
