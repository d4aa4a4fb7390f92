"""Adaptive Cards for approvals: the card in an approver's 1:1 chat (the tool, its arguments, the requester, the
deadline; Approve and Deny with a reason and, with `allow_edit`, the editable arguments), the same card once the
approval ended, a reminder, and the note in the requester's own conversation while the call waits."""

from __future__ import annotations

import json
from typing import Any

from microsoft_teams.cards import AdaptiveCard, Fact, FactSet, TextInput

from elicithub.core.approval import DECISION_FIELDS
from elicithub.core.elicitation import Elicitation
from elicithub.surfaces.reach import how_it_ended
from elicithub.surfaces.teams.cards import execute, form_body, new_card, note, text

APPROVE = "elicithub.approve"
DENY = "elicithub.deny"
REASON = "reason"
"""The id of the card's reason input (the edits' inputs are `q<position>`, as a question card's)."""

_MARKS = {"approved": "✅", "denied": "🚫", "expired": "⌛", "cancelled": "✖️"}

ARGUMENTS_MAX = 4000
"""The most of a call's arguments a card shows (a card holds about 28 KB); longer ones end with an ellipsis."""


def edit_schema(elicitation: Elicitation) -> dict[str, Any]:
    """The editable arguments of the call (`allow_edit`): the approval's form without its decision fields."""
    schema = elicitation.requested_schema or {}
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k not in DECISION_FIELDS}
    return {"type": "object", "properties": properties}


def _about(elicitation: Elicitation, asked: str | None) -> list[Any]:
    context = elicitation.context
    tool = f"{context.get('serverId') or ''}.{context.get('toolName') or ''}".strip(".")
    facts = [Fact(title="Tool", value=tool), Fact(title="Requester", value=str(context.get("requester") or ""))]
    if asked is not None:
        facts.append(Fact(title="Asked of", value=asked))
        facts.append(Fact(title="Open until", value=elicitation.expires_at.strftime("%Y-%m-%d %H:%M UTC")))
    arguments = json.dumps(context.get("arguments") or {}, indent=2, ensure_ascii=False)
    if len(arguments) > ARGUMENTS_MAX:
        arguments = arguments[: ARGUMENTS_MAX - 1] + "…"
    return [
        text(elicitation.message, weight="Bolder"),
        FactSet(facts=facts),
        text("Arguments", size="Small", weight="Bolder"),
        text(arguments, font_type="Monospace", size="Small", spacing="None"),
    ]


def approval_card(
    elicitation: Elicitation,
    asked: str,
    given: dict[str, Any] | None = None,
    errors: dict[str, str] | None = None,
) -> AdaptiveCard:
    """The card that asks an approver; `asked`: who it is asked of, as a sentence names them. A refused answer (an
    edit that does not fit the tool's schema) comes back with what was sent and the errors under their fields."""
    given, errors = given or {}, errors or {}
    body = _about(elicitation, asked)
    edits = edit_schema(elicitation)
    if edits["properties"]:
        body.append(text("Change before approving (optional)", size="Small", weight="Bolder"))
        body.extend(form_body(edits, given, errors))
    if "" in errors:
        body.append(text(errors[""], color="Attention"))
    reason = given.get(REASON)
    body.append(
        TextInput(
            id=REASON, label="Reason (optional)", is_multiline=True, value=reason if isinstance(reason, str) else None
        )
    )
    body.append(note("The first answer decides."))
    actions = [
        execute("Approve", APPROVE, elicitation.id, inputs=True, style="positive"),
        execute("Deny", DENY, elicitation.id, inputs=True, style="destructive"),
    ]
    return new_card(body, list(actions))


def ended_label(elicitation: Elicitation) -> str:
    """How an approval ended, as its cards say it: ✅ Approved by carol, 🚫 Denied by carol: reason, ⌛ Expired, ..."""
    kind, words = how_it_ended(elicitation)
    return f"{_MARKS.get(kind, _MARKS['cancelled'])} {words}"


def ended_card(elicitation: Elicitation) -> AdaptiveCard:
    """An approver's card once the approval ended: its inputs and buttons gone, how it ended and by whom."""
    return new_card([*_about(elicitation, None), text(ended_label(elicitation), weight="Bolder")])


def reminder(elicitation: Elicitation) -> str:
    """A message in the approver's chat, below the card it reminds them of."""
    return f"Reminder: {elicitation.message} (open until {elicitation.expires_at.strftime('%Y-%m-%d %H:%M UTC')})"


def waiting(asked: str) -> str:
    return f"Waiting for approval by {asked}."


def waiting_card(message: str) -> AdaptiveCard:
    """What the requester's conversation shows of an approval others answer: that the call waits, nothing to press."""
    return new_card([text(message)])


def waited_card(message: str, elicitation: Elicitation) -> AdaptiveCard:
    """The requester's note once the approval ended."""
    return new_card([text(message), note(ended_label(elicitation))])
