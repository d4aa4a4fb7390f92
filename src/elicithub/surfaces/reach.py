"""What the surfaces that reach people outside the hub's pages share (Slack, Teams, email): who a notice of an
approval reaches, and counting what was sent (`elicithub_notifications_total{channel, outcome}` in /metrics)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from elicithub.core.approval import People
from elicithub.core.elicitation import Elicitation

Notified = Callable[[str, str], None]
"""Count one notification by its channel (`slack`, `teams`, `email`) and outcome: `sent`; `retried` (this attempt
failed, another follows); `failed` (given up); `skipped` (no longer needed: its question ended first). The hub hands
its `Metrics.notification` to each surface it builds."""


def uncounted(channel: str, outcome: str) -> None:
    """A surface built without the hub's metrics (a test's)."""


def reached(elicitation: Elicitation, to: People, groups: Mapping[str, Collection[str]]) -> set[str]:
    """The hub users a notice to `to` reaches: the users it names and the members of the hub's static `groups` it
    names, never the approval's requester (their own chat shows it, when they may answer it). The members of an
    identity provider's group cannot be known here: they find the approval in their inbox."""
    return {*to.users, *(m for g in to.groups for m in groups.get(g, ()))} - {elicitation.user_id}


def how_it_ended(elicitation: Elicitation) -> tuple[str, str]:
    """How a question ended (or, pending past its deadline, is ending), as every channel says it: its kind
    (`approved`, `denied`, `answered`, `declined`, `expired`, `cancelled`) and words ("Approved by carol: during the
    window", "Expired")."""
    content = elicitation.answer.content if elicitation.answer is not None else None
    reason = str((content or {}).get("reason") or "").strip()
    by = f" by {elicitation.answered_by}" if elicitation.answered_by else ""
    why = f": {reason}" if reason else ""
    outcome = elicitation.outcome
    if outcome in ("expired", None):  # (one still pending is past its deadline: it is over)
        return "expired", "Expired"
    if outcome == "cancelled":
        return "cancelled", f"Cancelled{by}"
    if elicitation.approval is None:
        return ("answered", "Answered") if outcome == "accepted" else ("declined", "Declined")
    if outcome == "accepted" and (content or {}).get("approve") is True:
        return "approved", f"Approved{by}{why}"
    return "denied", f"Denied{by}{why}"


def accounts_of(
    to: People, requester: str, groups: Mapping[str, Collection[str]], accounts: Mapping[str, str]
) -> list[str]:
    """The accounts (`accounts`: a surface's account id -> hub user) of those a notice to `to` reaches (see
    `reached`: never the requester), sorted."""
    people = {*to.users, *(m for g in to.groups for m in groups.get(g, ()))} - {requester}
    return sorted(account for account, user in accounts.items() if user in people)
