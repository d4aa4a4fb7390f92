"""The in-process backend's event logs."""

from __future__ import annotations

from collections import OrderedDict, deque

from elicithub.core.jsoncodec import JsonMapping, JsonObject, as_object
from elicithub.store.notices import Notifier

MAX_KEYS = 10_000
"""Event logs kept in memory at most; the least recently written go first."""


class MemoryEvents:
    """A ring of the newest events per conversation; readers wait on a notifier instead of polling."""

    def __init__(self, max_len: int = 1000) -> None:
        self._logs: OrderedDict[str, tuple[int, deque[tuple[int, JsonObject]]]] = OrderedDict()
        self._max_len = max_len
        self._appended = Notifier()

    async def append(self, key: str, event: JsonMapping) -> int:
        return self._add(key, event)

    def post(self, key: str, event: JsonMapping, *, followed: bool = True) -> None:
        self._add(key, event)  # in memory, storing it is adding it

    def _add(self, key: str, event: JsonMapping) -> int:
        last, ring = self._logs.pop(key, (0, deque(maxlen=self._max_len)))
        ring.append((last + 1, as_object(event)))
        self._logs[key] = (last + 1, ring)
        if len(self._logs) > MAX_KEYS:
            self._logs.popitem(last=False)
        self._appended.notify(key)
        return last + 1

    async def read(self, key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        _, ring = self._logs.get(key, (0, ()))
        return [item for item in ring if item[0] > after][:limit]

    async def wait(self, key: str, after: int, timeout_s: float, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        return await self._appended.wait_for(key, lambda: self.read(key, after, limit), timeout_s)

    async def last(self, key: str) -> int:
        return self._logs.get(key, (0, ()))[0]

    def forget(self, key: str) -> None:
        self._logs.pop(key, None)
