"""The Store protocol: keyed reads and compare-and-set transitions of elicitations."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from elicithub.core.elicitation import Answer, Elicitation, State


class Store(Protocol):
    async def put(self, elicitation: Elicitation) -> None:
        """Save a new pending elicitation."""

    async def get(self, elicitation_id: str) -> Elicitation | None: ...

    async def transition(self, elicitation_id: str, state: State, answer: Answer | None, at: datetime) -> bool:
        """Move a pending elicitation to `state`; False when it was no longer pending (compare-and-set)."""

    async def due(self, now: datetime, limit: int = 500) -> list[Elicitation]:
        """Pending elicitations whose deadline has passed."""

    async def purge(self, resolved_before: datetime) -> int:
        """Forget terminal elicitations resolved before the given time."""

    async def close(self) -> None: ...
