"""What an admin does with every user's questions: list those still open (whose, where from, since when; never what
they ask), and cancel one, which its run takes as it takes any cancel."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Elicitation, State, utcnow
from elicithub.core.ports import RunStore
from elicithub.core.waiting import Resolution
from elicithub.errors import AlreadyResolved, ElicitationNotFound, Expired

log = logging.getLogger(__name__)

LISTED = 1000
"""How many open questions a listing reads at most (across every hub sharing the store)."""


@dataclass(frozen=True)
class OpenQuestion:
    """A question still waiting for its person, and the surface they use (chat, mcp, a2a, slack: their run's;
    None when the run is no longer on record)."""

    elicitation: Elicitation
    surface: str | None


def service_of(elicitation: Elicitation) -> str | None:
    """The MCP server or A2A agent a question comes from (or whose sign-in it asks for)."""
    return elicitation.context.get("serverId") or elicitation.context.get("agentId")


class AdminQuestions:
    def __init__(self, broker: Broker, runs: RunStore) -> None:
        self.broker = broker
        self.runs = runs

    async def open(
        self, *, user: str | None = None, server: str | None = None, older_than_s: float | None = None
    ) -> list[OpenQuestion]:
        """The questions still open on every hub sharing the store, newest first; only `user`'s, only those from
        `server` (an MCP server's or A2A agent's id), only those asked at least `older_than_s` seconds ago."""
        now = utcnow()
        asked_by = now - timedelta(seconds=older_than_s) if older_than_s is not None else None
        found = [
            e
            for e in await self.broker.pending(LISTED)
            if not e.is_due(now)
            and (user is None or e.user_id == user)
            and (server is None or service_of(e) == server)
            and (asked_by is None or e.created_at <= asked_by)
        ]
        found.sort(key=lambda e: e.created_at, reverse=True)
        run_ids = list(dict.fromkeys(e.run_id for e in found))
        runs = await asyncio.gather(*(self.runs.get(run_id, messages=False) for run_id in run_ids))
        surfaces = {run_id: run.surface if run is not None else None for run_id, run in zip(run_ids, runs, strict=True)}
        return [OpenQuestion(e, surfaces[e.run_id]) for e in found]

    async def cancel(self, elicitation_id: str, admin: str) -> Resolution:
        """End a question, whoever's it is, as cancelled: its run, on whichever hub waits for it, goes on as after
        its person's cancel. Raises ElicitationNotFound, Expired, or AlreadyResolved when it has ended otherwise
        (a cancel included)."""
        elicitation = await self.broker.store.get(elicitation_id)
        if elicitation is None:
            raise ElicitationNotFound(elicitation_id)
        outcome = elicitation.outcome
        if outcome is None:
            # Past its deadline but not swept yet, it expires now, as it would for an answer.
            state = State.EXPIRED if elicitation.is_due(utcnow()) else State.CANCELLED
            resolution = await self.broker.end(elicitation_id, state)
            if resolution.outcome == "cancelled":
                about = {"elicitation_id": elicitation_id, "run_id": elicitation.run_id}
                log.info("elicitation %s cancelled by admin %s", elicitation_id, admin, extra=about)
                return resolution
            outcome = resolution.outcome
        if outcome == "expired":
            raise Expired(elicitation_id)
        raise AlreadyResolved(elicitation_id, outcome, differently=False)
