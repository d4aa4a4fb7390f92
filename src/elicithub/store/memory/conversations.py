"""The in-process backend's conversations, each with its list of messages; purging one forgets its event log too."""

from __future__ import annotations

from dataclasses import replace

from elicithub.core.runs import ConversationRecord, Message
from elicithub.store.memory.events import MemoryEvents


class MemoryConversations:
    ordered = True

    def __init__(self, events: MemoryEvents) -> None:
        self._items: dict[str, ConversationRecord] = {}  # kept without their messages
        self._messages: dict[str, list[Message]] = {}
        self._events = events

    async def get(self, key: str, *, messages: bool = True) -> ConversationRecord | None:
        current = self._items.get(key)
        if current is None:
            return None
        kept = self._messages[key]
        return replace(current, messages=list(kept) if messages else [], stored=len(kept))

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        current = self._items.get(record.key)
        if (current.version if current is not None else None) != expected_version:
            return False
        kept = self._messages.setdefault(record.key, [])
        del kept[record.stored :]
        kept += record.messages[record.stored :]
        self._items[record.key] = replace(record, messages=[], stored=0)
        return True

    async def purge(self, idle_before: float) -> int:
        old = [k for k, c in self._items.items() if c.active_run_id is None and c.updated_at < idle_before]
        for key in old:
            del self._items[key], self._messages[key]
            self._events.forget(key)
        return len(old)
