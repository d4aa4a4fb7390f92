"""The in-process backend, for tests and single-process use without persistence: every record kind in dicts."""

from __future__ import annotations

from elicithub.store.casts import LocalCasts
from elicithub.store.memory.conversations import MemoryConversations
from elicithub.store.memory.elicitations import MemoryElicitations
from elicithub.store.memory.events import MemoryEvents
from elicithub.store.memory.kv import MemoryKv
from elicithub.store.memory.runs import MemoryRuns


class MemoryBackend:
    shared = False
    durable = False

    def __init__(self, events_max_len: int = 1000) -> None:
        self.url = "memory://"
        self.elicitations = MemoryElicitations()
        self.events = MemoryEvents(events_max_len)
        self.conversations = MemoryConversations(self.events)
        self.runs = MemoryRuns(self.conversations)
        self.kv = MemoryKv()
        self.casts = LocalCasts()

    async def open(self) -> None:
        return None

    async def ready(self) -> str | None:
        return None

    async def close(self) -> None:
        await self.elicitations.close()
