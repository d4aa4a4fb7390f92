"""This hub's pending count: the questions a run of the hub waits on, each counted once, whichever hub ends them."""

from __future__ import annotations

from elicithub.core.elicitation import Elicitation
from elicithub.core.ports import Counts


class Asked:
    """Questions a run of this hub waits on (in its task, or parked here), from before they show until their end is
    heard here or the run stops waiting on them."""

    def __init__(self, counts: Counts | None) -> None:
        self._counts = counts
        self._by_id: dict[str, Elicitation] = {}

    def add(self, elicitation: Elicitation) -> None:
        if elicitation.id not in self._by_id:
            self._by_id[elicitation.id] = elicitation
            if self._counts is not None:
                self._counts.pending(elicitation, 1)

    def discard(self, elicitation_id: str) -> None:
        if (elicitation := self._by_id.pop(elicitation_id, None)) is not None and self._counts is not None:
            self._counts.pending(elicitation, -1)
