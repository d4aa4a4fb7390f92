"""The in-process backend's conversations; purging one forgets its event log too."""

from __future__ import annotations

from elicithub.core.runs import ConversationRecord
from elicithub.store.memory.events import MemoryEvents


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
