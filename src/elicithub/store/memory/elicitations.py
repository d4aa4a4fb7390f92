"""The in-process backend's elicitations: a dict, with compare-and-set atomic on one event loop."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import datetime

from elicithub.core.elicitation import Answer, Elicitation, State, resolved
from elicithub.store.notices import LocalResolutions


class MemoryElicitations:
    def __init__(self) -> None:
        self._items: dict[str, Elicitation] = {}
        self._resolutions = LocalResolutions()

    async def put(self, elicitation: Elicitation) -> None:
        self._items[elicitation.id] = elicitation

    async def get(self, elicitation_id: str) -> Elicitation | None:
        return self._items.get(elicitation_id)

    async def watch(self, elicitation_id: str) -> Elicitation | None:
        return self._items.get(elicitation_id)  # one process: its listeners hear every end

    async def transition(
        self, elicitation_id: str, state: State, answer: Answer | None, at: datetime, read: Elicitation | None = None
    ) -> bool:
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
