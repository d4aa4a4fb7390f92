"""How an approval ended, in the words every surface that reaches approvers shows it (each adds its own mark)."""

from __future__ import annotations

from elicithub.core.elicitation import Elicitation


def how_it_ended(elicitation: Elicitation) -> tuple[str, str]:
    """The kind of end (approved, denied, expired, cancelled) and its words: "Approved by carol", "Denied by carol:
    not now", "Expired", "Cancelled by alice"."""
    content = elicitation.answer.content if elicitation.answer is not None else None
    reason = str((content or {}).get("reason") or "").strip()
    by = f" by {elicitation.answered_by}" if elicitation.answered_by else ""
    why = f": {reason}" if reason else ""
    outcome = elicitation.outcome
    if outcome == "accepted" and (content or {}).get("approve") is True:
        return "approved", f"Approved{by}{why}"
    if outcome in ("accepted", "declined"):
        return "denied", f"Denied{by}{why}"
    if outcome == "expired":
        return "expired", "Expired"
    return "cancelled", f"Cancelled{by}"
