"""What a broker remembers of the questions opened in its process, so that a wait or an answer that follows soon
needs no read: which of them nobody waits on yet, and each one's stored copy."""

from __future__ import annotations

from elicithub.core.elicitation import Elicitation, utcnow

KEPT_OPENED = 10_000
"""Questions opened here remembered at most: those not yet waited on (one forgotten is read again by its wait), and
those held for their answer's lookup (one forgotten is read again by it)."""


class Opened:
    def __init__(self) -> None:
        self._unheard: dict[str, None] = {}
        """Questions opened here that nobody waits on yet and whose end no notice told of (oldest first); a wait for
        one not here reads whether it has ended."""
        self._held: dict[str, Elicitation] = {}
        """Questions opened here, as stored, until they end or their deadline passes: their answer's `lookup` needs no
        read (`respond`'s compare-and-set is made against this copy, and fails if the question changed since)."""

    def __contains__(self, elicitation_id: str) -> bool:
        return elicitation_id in self._unheard or elicitation_id in self._held

    def note(self, elicitation_id: str) -> None:
        """A question is about to be stored, while notices of ends are heard: a `wait` that follows then knows
        whether it can have ended meanwhile."""
        if len(self._unheard) >= KEPT_OPENED:
            self._unheard.pop(next(iter(self._unheard)))
        self._unheard[elicitation_id] = None

    def waited(self, elicitation_id: str) -> bool:
        """A wait for the question begins: whether its end may have been heard (or missed) since it was opened here,
        or it was not opened here; either way, it must be read again."""
        heard = elicitation_id not in self._unheard
        self._unheard.pop(elicitation_id, None)
        return heard

    def hold(self, elicitations: tuple[Elicitation, ...]) -> None:
        held = self._held
        now = utcnow()
        # Oldest first: let go of those past their deadline (an answer now expires them, after a read), and of the
        # oldest beyond the bound.
        while held and ((first := next(iter(held.values()))).expires_at < now or len(held) >= KEPT_OPENED):
            del held[first.id]
        for elicitation in elicitations:
            held[elicitation.id] = elicitation

    def held(self, elicitation_id: str) -> Elicitation | None:
        return self._held.get(elicitation_id)

    def let_go(self, elicitation_id: str) -> None:
        """The question ends (or may have): its answer reads it again."""
        self._held.pop(elicitation_id, None)

    def ended(self, elicitation_id: str) -> None:
        """A notice told of its end: a wait for it, if one comes, reads how it ended."""
        self._held.pop(elicitation_id, None)
        self._unheard.pop(elicitation_id, None)

    def missed(self) -> None:
        """Listening started over, and what ended meanwhile was not heard: a wait reads every question again."""
        self._unheard.clear()
