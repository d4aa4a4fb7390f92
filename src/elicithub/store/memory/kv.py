"""The in-process backend's key-value entries, each with its optional expiry, and its lists of expiring entries."""

from __future__ import annotations

import time

from elicithub.core.ports import Entry

PURGE_EVERY = 256
"""Adds between two sweeps of every list for expired entries (a list nobody adds to any more is swept then)."""


class MemoryKv:
    def __init__(self) -> None:
        self._items: dict[str, tuple[bytes, float | None]] = {}
        self._lists: dict[str, set[Entry]] = {}
        self._adds = 0

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

    async def add_entry(self, key: str, value: str, ttl_s: float) -> None:
        now_ms = int(time.time() * 1000)
        self._lists.setdefault(key, set()).add(Entry(now_ms + int(ttl_s * 1000), value))
        self._adds += 1
        for swept in list(self._lists) if self._adds % PURGE_EVERY == 0 else [key]:
            self._expire(swept, now_ms)

    async def entries(self, key: str, limit: int, before: Entry | None = None) -> list[Entry]:
        self._expire(key, int(time.time() * 1000))
        kept = sorted(self._lists.get(key, ()), reverse=True)
        return [entry for entry in kept if before is None or entry < before][:limit]

    def _expire(self, key: str, now_ms: int) -> None:
        kept = {entry for entry in self._lists.get(key, ()) if entry.expires_ms > now_ms}
        if kept:
            self._lists[key] = kept
        else:
            self._lists.pop(key, None)
