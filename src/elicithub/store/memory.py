"""The in-process backend, for tests and single-process use without persistence: every record kind in dicts."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator
from dataclasses import replace
from datetime import datetime
from typing import Any

from elicithub.core.elicitation import Answer, Elicitation, State, resolved
from elicithub.core.runs import ConversationRecord, RunRecord
from elicithub.store.base import LocalResolutions, Notifier


class MemoryStore:
    def __init__(self) -> None:
        self._items: dict[str, Elicitation] = {}
        self._resolutions = LocalResolutions()

    async def put(self, elicitation: Elicitation) -> None:
        self._items[elicitation.id] = elicitation

    async def get(self, elicitation_id: str) -> Elicitation | None:
        return self._items.get(elicitation_id)

    async def transition(self, elicitation_id: str, state: State, answer: Answer | None, at: datetime) -> bool:
        # No await between the check and the write, so this is atomic on one event loop.
        current = self._items.get(elicitation_id)
        if current is None or current.state is not State.PENDING:
            return False
        self._items[elicitation_id] = resolved(current, state, answer, at)
        self._resolutions.announce(elicitation_id)
        return True

    async def due(self, now: datetime, limit: int = 500) -> list[Elicitation]:
        return [e for e in self._items.values() if e.is_due(now)][:limit]

    async def purge(self, resolved_before: datetime) -> int:
        old = [k for k, e in self._items.items() if e.resolved_at is not None and e.resolved_at < resolved_before]
        for key in old:
            del self._items[key]
        return len(old)

    def resolutions(self) -> AsyncGenerator[str | None, None]:
        return self._resolutions.listen()

    async def close(self) -> None:
        self._items.clear()


class MemoryRuns:
    """Runs of one process: any owner but the current one is gone (a restart), so nobody else is alive."""

    def __init__(self) -> None:
        self._items: dict[str, RunRecord] = {}

    async def save(self, record: RunRecord) -> None:
        self._items[record.run_id] = record

    async def get(self, run_id: str) -> RunRecord | None:
        return self._items.get(run_id)

    async def claim(self, run_id: str, expected_owner: str, owner: str) -> bool:
        record = self._items.get(run_id)
        if record is None or record.owner != expected_owner:
            return False
        self._items[run_id] = replace(record, owner=owner)
        return True

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        return [r for r in self._items.values() if r.status != "finished" and r.owner != other_than][:limit]

    async def purge(self, finished_before: float) -> int:
        old = [k for k, r in self._items.items() if r.status == "finished" and r.updated_at < finished_before]
        for key in old:
            del self._items[key]
        return len(old)

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        return None

    async def alive(self, owner: str) -> bool:
        return False


class MemoryConversations:
    def __init__(self, events: MemoryEvents) -> None:
        self._items: dict[str, ConversationRecord] = {}
        self._events = events

    async def get(self, key: str) -> ConversationRecord | None:
        return self._items.get(key)

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        current = self._items.get(record.key)
        if (current.version if current is not None else None) != expected_version:
            return False
        self._items[record.key] = record
        return True

    async def purge(self, idle_before: float) -> int:
        old = [k for k, c in self._items.items() if c.active_run_id is None and c.updated_at < idle_before]
        for key in old:
            del self._items[key]
            self._events.forget(key)
        return len(old)


class MemorySecrets:
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


MAX_KEYS = 10_000
"""Event logs kept in memory at most; the least recently written go first."""


class MemoryEvents:
    """A ring of the newest events per conversation; readers wait on a notifier instead of polling."""

    def __init__(self, max_len: int = 1000) -> None:
        self._logs: OrderedDict[str, tuple[int, deque[tuple[int, dict[str, Any]]]]] = OrderedDict()
        self._max_len = max_len
        self._appended = Notifier()

    async def append(self, key: str, event: dict[str, Any]) -> int:
        last, ring = self._logs.pop(key, (0, deque(maxlen=self._max_len)))
        ring.append((last + 1, event))
        self._logs[key] = (last + 1, ring)
        if len(self._logs) > MAX_KEYS:
            self._logs.popitem(last=False)
        self._appended.notify(key)
        return last + 1

    async def read(self, key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, dict[str, Any]]]:
        _, ring = self._logs.get(key, (0, ()))
        return [item for item in ring if item[0] > after][:limit]

    async def wait(self, key: str, after: int, timeout_s: float, limit: int = 1000) -> list[tuple[int, dict[str, Any]]]:
        return await self._appended.wait_for(key, lambda: self.read(key, after, limit), timeout_s)

    async def last(self, key: str) -> int:
        return self._logs.get(key, (0, ()))[0]

    def forget(self, key: str) -> None:
        self._logs.pop(key, None)


class MemoryBackend:
    shared = False
    durable = False

    def __init__(self, events_max_len: int = 1000) -> None:
        self.url = "memory://"
        self.elicitations = MemoryStore()
        self.runs = MemoryRuns()
        self.events = MemoryEvents(events_max_len)
        self.conversations = MemoryConversations(self.events)
        self.secrets = MemorySecrets()

    async def close(self) -> None:
        await self.elicitations.close()
