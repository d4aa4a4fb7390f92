"""Who hears of approvals, and what each person may answer.

For the surfaces that reach approvers (an inbox, Slack direct messages): register an `ApprovalListener` on the hub's
`ApprovalNotices` (`hub.approval_notices.register(listener)`), and ask `Answerable.questions(user, groups)` which
open questions a person can answer. A listener is told on the hub that fires each notice, which need not be the hub
whose run asked: `added` and `ended` fire where the run waiting on the approval goes on, `reminded` and `escalated`
on whichever hub's sweep takes the timer (exactly one). A listener that must reach a person connected to another hub
writes to the store (as every surface does).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Collection, Mapping
from typing import Protocol

from elicithub.core.approval import People
from elicithub.core.broker import Broker
from elicithub.core.elicitation import Elicitation, State, utcnow
from elicithub.core.ports import Backend

log = logging.getLogger(__name__)

LISTED = 1000
"""How many open questions a listing reads at most (across every hub sharing the store)."""


class ApprovalListener(Protocol):
    """Told of an approval's life. `to`: who may answer it now (users and groups; for `escalated`, those it was
    escalated to). `ended` gets the approval as it ended (its outcome, and `answered_by`)."""

    async def added(self, elicitation: Elicitation, to: People) -> None: ...

    async def reminded(self, elicitation: Elicitation, to: People) -> None: ...

    async def escalated(self, elicitation: Elicitation, to: People) -> None: ...

    async def ended(self, elicitation: Elicitation) -> None: ...


class ApprovalNotices:
    """The listeners of one hub; a listener that fails is logged and the others are still told."""

    def __init__(self) -> None:
        self._listeners: list[ApprovalListener] = []

    def register(self, listener: ApprovalListener) -> None:
        self._listeners.append(listener)

    async def added(self, elicitation: Elicitation, to: People) -> None:
        log.info("approval %s asked of %s", elicitation.id, named(to), extra=_about(elicitation))
        for listener in self._listeners:
            await _told(listener.added(elicitation, to), elicitation)

    async def reminded(self, elicitation: Elicitation, to: People) -> None:
        log.info("approval %s: reminded %s", elicitation.id, named(to), extra=_about(elicitation))
        for listener in self._listeners:
            await _told(listener.reminded(elicitation, to), elicitation)

    async def escalated(self, elicitation: Elicitation, to: People) -> None:
        log.info("approval %s: escalated to %s", elicitation.id, named(to), extra=_about(elicitation))
        for listener in self._listeners:
            await _told(listener.escalated(elicitation, to), elicitation)

    async def ended(self, elicitation: Elicitation) -> None:
        for listener in self._listeners:
            await _told(listener.ended(elicitation), elicitation)


async def _told(notice: Awaitable[None], elicitation: Elicitation) -> None:
    try:
        await notice
    except Exception:
        log.exception("an approval listener failed on %s", elicitation.id)


def named(people: People) -> str:
    """People as a sentence names them: "carol, group ops"."""
    return ", ".join([*people.users, *(f"group {g}" for g in people.groups)]) or "nobody"


def _about(elicitation: Elicitation) -> dict[str, str]:
    return {"elicitation_id": elicitation.id, "run_id": elicitation.run_id}


def asked_of(elicitation: Elicitation) -> People:
    """Who may answer an approval now: its approvers, and once escalated those it escalated to."""
    approval = elicitation.approval
    if approval is None or approval.approvers is None:
        return People((elicitation.user_id,))
    people = approval.approvers
    if approval.escalate_to is not None and approval.escalated(utcnow()):
        escalated = approval.escalate_to
        users = tuple(dict.fromkeys([*people.users, *escalated.users]))
        return People(users, tuple(dict.fromkeys([*people.groups, *escalated.groups])))
    return people


async def awaited(backend: Backend, run_id: str, user_id: str | None) -> list[Elicitation]:
    """The open approvals of `user_id`'s calls that their run `run_id` waits on, which other people give."""
    run = await backend.runs.get(run_id, messages=False)
    found = []
    for elicitation_id in run.pause.elicitation_ids.values() if run is not None and run.pause is not None else ():
        elicitation = await backend.elicitations.get(elicitation_id)
        if elicitation is None or elicitation.user_id != user_id or elicitation.asks_requester:
            continue
        if elicitation.state is State.PENDING and not elicitation.is_due(utcnow()):
            found.append(elicitation)
    return found


def waiting_for(elicitation: Elicitation) -> str:
    """What a call waiting on an approval says it does (its status message)."""
    return f"Waiting for approval by {named(asked_of(elicitation))}."


class Answerable:
    """The open questions a person can answer, on every hub sharing the store: their own runs' (approvals routed to
    others excepted) and the approvals routed to them. `groups`: the hub's static `groups:`, added to a person's
    groups from their identity provider."""

    def __init__(self, broker: Broker, groups: Mapping[str, Collection[str]]) -> None:
        self.broker = broker
        self.groups = groups

    def of(self, user_id: str, extra: Collection[str] = ()) -> frozenset[str]:
        """The groups `user_id` is in: those of `groups:`, and `extra` (their identity provider's)."""
        return frozenset(g for g, members in self.groups.items() if user_id in members) | frozenset(extra)

    async def questions(self, user_id: str, groups: Collection[str] = ()) -> list[Elicitation]:
        """Newest first; `groups`: the person's groups from their identity provider (static ones are added)."""
        now = utcnow()
        everyone = self.of(user_id, groups)
        found = []
        for elicitation in await self.broker.pending(LISTED):
            if elicitation.is_due(now):
                continue
            if elicitation.approval is None:
                if elicitation.user_id == user_id:
                    found.append(elicitation)
            elif elicitation.approval.standing(user_id, everyone, elicitation.user_id, now) == "answers":
                found.append(elicitation)
        found.sort(key=lambda e: e.created_at, reverse=True)
        return found
