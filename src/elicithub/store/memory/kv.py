"""The in-process backend's key-value entries, each with its optional expiry, its lists of expiring entries, and its
sets of members held for a while."""

from __future__ import annotations

import time

from elicithub.core.ports import Entry, Held

PURGE_EVERY = 256
"""Adds (holds) between two sweeps of every list (set) for expired entries (members): a list or set nobody adds to any
more is swept then."""


class MemoryKv:
    def __init__(self) -> None:
        self._items: dict[str, tuple[bytes, float | None]] = {}
        self._lists: dict[str, set[Entry]] = {}
        self._adds = 0
        self._sets: dict[str, dict[str, int]] = {}
        """Each set's members, with the time (unix ms) each lapses."""
        self._holds = 0

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

    async def hold(self, key: str, member: str, ttl_s: float, limit: int | None = None) -> Held:
        now_ms = int(time.time() * 1000)
        self._holds += 1
        for swept in list(self._sets) if self._holds % PURGE_EVERY == 0 else [key]:
            self._lapse(swept, now_ms)
        members = self._sets.get(key, {})
        taken = member in members or limit is None or len(members) < limit
        if taken:
            members[member] = now_ms + int(ttl_s * 1000)
            self._sets[key] = members
        return Held(taken, len(members), min(members.values(), default=0))

    async def release(self, key: str, member: str) -> None:
        members = self._sets.get(key, {})
        members.pop(member, None)
        if not members:
            self._sets.pop(key, None)

    async def holding(self, key: str) -> Held:
        self._lapse(key, int(time.time() * 1000))
        members = self._sets.get(key, {})
        return Held(False, len(members), min(members.values(), default=0))

    def _lapse(self, key: str, now_ms: int) -> None:
        kept = {member: end for member, end in self._sets.get(key, {}).items() if end > now_ms}
        if kept:
            self._sets[key] = kept
        else:
            self._sets.pop(key, None)
