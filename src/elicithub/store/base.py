"""The Store protocol: keyed reads and compare-and-set transitions of elicitations, and notices of them."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Protocol

from elicithub.core.bus import EventBus
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

    def resolutions(self) -> AsyncGenerator[str | None, None]:
        """The ids of elicitations as they reach a terminal state, through any client of this store (this one too).

        The first item is None, once listening has begun; None comes again whenever listening had to start over
        (a lost connection), since ids resolved in between are not replayed: re-read what you wait for. A store
        private to one process hears only its own transitions. Close the generator to stop listening.
        """

    async def close(self) -> None: ...


class LocalResolutions:
    """The resolution notices of a store that lives in one process: its own transitions, to its own listeners."""

    def __init__(self) -> None:
        self._bus: EventBus[str] = EventBus()

    def announce(self, elicitation_id: str) -> None:
        self._bus.publish("resolved", elicitation_id)

    async def listen(self) -> AsyncGenerator[str | None, None]:
        async with self._bus.subscribe("resolved") as queue:
            yield None
            while True:
                yield await queue.get()
