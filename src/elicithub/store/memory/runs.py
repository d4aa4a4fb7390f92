"""The in-process backend's runs: the records themselves, so a save copies nothing however long the conversation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from elicithub.core.runs import Message, RunRecord
from elicithub.store.memory.conversations import MemoryConversations


class MemoryRuns:
    """Runs of one process: any owner but the current one is gone (a restart), so nobody else is alive."""

    def __init__(self, conversations: MemoryConversations) -> None:
        self._items: dict[str, RunRecord] = {}
        self._conversations = conversations

    async def save(self, record: RunRecord) -> None:
        self._items[record.run_id] = record

    async def get(self, run_id: str, *, messages: bool = True, known: Sequence[Message] = ()) -> RunRecord | None:
        record = self._items.get(run_id)
        return record if record is None or messages else _without_messages(record)

    async def finish(self, record: RunRecord) -> int | None:
        self._items[record.run_id] = record
        return self._conversations.commit(record)

    async def claim(self, run_id: str, expected_owner: str, owner: str) -> bool:
        record = self._items.get(run_id)
        if record is None or record.owner != expected_owner:
            return False
        self._items[run_id] = replace(record, owner=owner)
        return True

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        listed = [r for r in self._items.values() if r.status != "finished" and r.owner != other_than][:limit]
        return [_without_messages(r) for r in listed]

    async def purge(self, finished_before: float) -> int:
        old = [k for k, r in self._items.items() if r.status == "finished" and r.updated_at < finished_before]
        for key in old:
            del self._items[key]
        return len(old)

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        return None

    async def alive(self, owner: str) -> bool:
        return False


def _without_messages(record: RunRecord) -> RunRecord:
    return replace(record, messages=[], history=0)
