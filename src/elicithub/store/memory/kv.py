"""The in-process backend's key-value entries, each with its optional expiry."""

from __future__ import annotations

import time


class MemoryKv:
    def __init__(self) -> None:
        self._items: dict[str, tuple[bytes, float | None]] = {}

    def _live(self, key: str) -> bytes | None:
        item = self._items.get(key)
        if item is None:
            return None
        if item[1] is not None and item[1] <= time.time():
            del self._items[key]
            return None
        return item[0]

    async def put(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        self._items[key] = (value, None if ttl_s is None else time.time() + ttl_s)

    async def get(self, key: str) -> bytes | None:
        return self._live(key)

    async def take(self, key: str) -> bytes | None:
        value = self._live(key)
        self._items.pop(key, None)
        return value

    async def delete(self, key: str) -> None:
        self._items.pop(key, None)
