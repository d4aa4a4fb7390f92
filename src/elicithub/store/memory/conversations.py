"""The in-process backend's conversations, each with its list of messages; purging one forgets its event log too."""

from __future__ import annotations

from dataclasses import replace

from elicithub.core.ports import Added
from elicithub.core.runs import ConversationRecord, Message, RunRecord, conversation_key
from elicithub.store.memory.events import MemoryEvents


class MemoryConversations:
    ordered = False  # its event posts show at once, ahead of store calls issued before them from tasks

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

    async def send(self, record: ConversationRecord) -> Added:
        current = self._items.get(record.key)
        if current is None:
            kept = self._messages[record.key] = list(record.messages)
            previous, version, after = None, 1, 0
        else:
            kept = self._messages[record.key]
            previous = replace(current, stored=len(kept))
            kept.append(record.messages[-1])
            version, after = current.version + 1, await self._events.last(record.key)
        written = replace(record, messages=[], version=version, active_run_after=after, stored=len(kept))
        self._items[record.key] = replace(written, stored=0)
        return Added(previous, written)

    def commit(self, run: RunRecord) -> int | None:
        """`RunStore.finish`'s commit of `run` to its conversation (see there)."""
        key = conversation_key(run.user_id, run.conversation_id)
        current = self._items.get(key)
        kept = self._messages.get(key, [])
        if current is None or current.active_run_id != run.run_id or len(kept) < run.history:
            return None
        kept += run.messages[len(kept) :]
        self._items[key] = replace(current, active_run_id=None, version=current.version + 1, updated_at=run.updated_at)
        return current.version + 1

    async def purge(self, idle_before: float) -> int:
        old = [k for k, c in self._items.items() if c.active_run_id is None and c.updated_at < idle_before]
        for key in old:
            del self._items[key], self._messages[key]
            self._events.forget(key)
        return len(old)
