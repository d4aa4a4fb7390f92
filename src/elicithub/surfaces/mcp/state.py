"""The MCP server surface's `requestState`: what a paused call needs on its retry, and its single use.

The SDK seals the state (AES-GCM under a key derived from the hub's master key, so every instance sharing that key
opens it), binds it to the caller and the call's arguments, and expires it. The hub adds single use: each state
names a one-time ticket kept in the store, taken atomically when a retry is accepted, so a replayed state is
refused on every instance.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from elicithub.core.ports import KeyValueStore
from elicithub.core.tickets import OnceTickets
from elicithub.errors import BadRequest


class StateRefused(BadRequest):
    """A retry's requestState cannot be used (replayed, another user's, for other arguments, or expired)."""

    code = "state_refused"


@dataclass(frozen=True)
class RoundState:
    user_id: str
    conversation_id: str
    run_id: str
    elicitation_ids: list[str]  # the questions of this round
    after: int  # the run's log position when the round was returned
    arguments: str  # a digest of the tool call's arguments
    round: int
    ticket: str
    expires_at: float

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, text: str) -> RoundState:
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError) as exc:
            raise StateRefused("This requestState is not one this hub issued; call the tool again without it.") from exc


def digest(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(arguments, sort_keys=True).encode()).hexdigest()


class Tickets:
    """One-time tickets in the store: issued with a round, taken once by the retry that answers it."""

    def __init__(self, store: KeyValueStore, clock: Callable[[], float] = time.time) -> None:
        self.once = OnceTickets(store, "mcp-round")
        self.clock = clock
        """The time (seconds since the epoch) a retry's state is checked against; a test may move it on."""

    async def issue(self, ttl_s: float) -> str:
        return await self.once.issue(ttl_s)

    async def take(self, state: RoundState, user_id: str, arguments: dict[str, Any]) -> None:
        """Check the state against this retry, then use its ticket up; raises StateRefused."""
        if state.user_id != user_id:
            raise StateRefused("This requestState belongs to another user.")
        if state.arguments != digest(arguments):
            raise StateRefused("This requestState was issued for a call with other arguments.")
        if state.expires_at <= self.clock():
            raise StateRefused("This requestState has expired; call the tool again without it.")
        if not await self.once.take(state.ticket):
            raise StateRefused("This requestState was already used; a retry is accepted once.")
