"""Waiting for a question to end: everyone here waiting for one question shares one future, and is woken with the
same Resolution."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from elicithub.core.elicitation import Elicitation, Outcome
from elicithub.core.jsoncodec import JsonObject


@dataclass(frozen=True)
class Resolution:
    """How an elicitation ended, as the waiting trigger sees it."""

    elicitation_id: str
    outcome: Outcome
    content: JsonObject | None = None
    answered_by: str | None = None
    """Who answered an approval (None for any other question, or one that ended without an answer)."""

    @classmethod
    def of(cls, elicitation: Elicitation) -> Resolution:
        assert elicitation.outcome is not None
        content = elicitation.answer.content if elicitation.answer is not None else None
        return cls(elicitation.id, elicitation.outcome, content, elicitation.answered_by)


@dataclass
class Waiting:
    """Everyone here waiting for one question (the run, a surface relaying it, a second reader): they share one
    future, each is woken once with the same resolution, and the first of them to learn of the end announces it."""

    elicitation: Elicitation
    future: asyncio.Future[Resolution]
    waiters: int = 0
    announced: bool = False


class Waiters:
    """Those waiting here, by question id."""

    def __init__(self) -> None:
        self._by_id: dict[str, Waiting] = {}

    def __contains__(self, elicitation_id: str) -> bool:
        return elicitation_id in self._by_id

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, elicitation_id: str) -> Waiting | None:
        return self._by_id.get(elicitation_id)

    def count(self, elicitation_id: str) -> int:
        """How many wait here for this question."""
        waiting = self._by_id.get(elicitation_id)
        return 0 if waiting is None else waiting.waiters

    @contextlib.contextmanager
    def join(self, elicitation: Elicitation) -> Iterator[Waiting]:
        """Join the waiters of a question here; the last to leave takes the entry away (a waiter that gives up
        leaves the others waiting)."""
        waiting = self._by_id.get(elicitation.id)
        if waiting is None:
            future: asyncio.Future[Resolution] = asyncio.get_running_loop().create_future()
            waiting = self._by_id[elicitation.id] = Waiting(elicitation, future)
        waiting.waiters += 1
        try:
            yield waiting
        finally:
            waiting.waiters -= 1
            if waiting.waiters == 0 and self._by_id.get(elicitation.id) is waiting:
                del self._by_id[elicitation.id]
