"""Block Kit for approvals, as plain values: the direct message that asks an approver (Approve, Deny, Edit…), the
same message once the approval has ended, a reminder, and the modals that deny with a reason or approve with edits."""

from __future__ import annotations

import json
from typing import Any

from elicithub.core.approval import DECISION_FIELDS
from elicithub.core.elicitation import Elicitation
from elicithub.surfaces.reach import how_it_ended
from elicithub.surfaces.slack.blocks import Block, form_view
from elicithub.surfaces.slack.text import SECTION_MAX, escape, mrkdwn, plain, shorten

APPROVE = "elicithub.approve"
DENY = "elicithub.deny"
EDIT = "elicithub.edit"
APPROVAL_FORM = "elicithub.approval"
"""The callback id of both modals; their `private_metadata` is `deny:ID` or `edit:ID`."""

_ARGUMENTS_MAX = SECTION_MAX - 8  # the code fences around them
_MARKS = {
    "approved": ":white_check_mark:",
    "denied": ":no_entry_sign:",
    "expired": ":hourglass:",
    "cancelled": ":heavy_multiplication_x:",
}


def editable(elicitation: Elicitation) -> bool:
    """Whether its approvers may change the call's arguments (`allow_edit`, and some argument a form can hold)."""
    properties = (elicitation.requested_schema or {}).get("properties") or {}
    return any(name not in DECISION_FIELDS for name in properties)


def _about(elicitation: Elicitation) -> list[Block]:
    arguments = json.dumps(elicitation.context.get("arguments") or {}, indent=2, ensure_ascii=False)
    return [
        {"type": "section", "text": mrkdwn(elicitation.message)},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"```{_escaped(arguments, _ARGUMENTS_MAX)}```"}},
    ]


def _escaped(text: str, most: int) -> str:
    """`text` escaped in at most `most` characters, shortened before escaping so that no escape is cut."""
    limit = most
    while len(escaped := escape(shorten(text, limit))) > most:
        limit = min(limit - 1, limit * most // len(escaped))  # escapes are up to 5 characters for 1
    return escaped


def _button(text: str, action_id: str, value: str, style: str | None = None) -> Block:
    button: Block = {"type": "button", "text": plain(text, 75), "action_id": action_id, "value": value}
    if style is not None:
        button["style"] = style
    return button


def approval_message(elicitation: Elicitation, asked: str) -> tuple[str, list[Block]]:
    """The direct message to an approver. `asked`: who it is asked of, as a sentence names them."""
    expires = elicitation.expires_at.strftime("%Y-%m-%d %H:%M UTC")
    buttons = [
        _button("Approve", APPROVE, elicitation.id, "primary"),
        _button("Deny", DENY, elicitation.id, "danger"),
    ]
    if editable(elicitation):
        buttons.append(_button("Edit…", EDIT, elicitation.id))
    note = f"An approval asked of {escape(asked)}; the first answer decides. Open until {expires}."
    blocks: list[Block] = [
        *_about(elicitation),
        {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]},
        {"type": "actions", "block_id": "approval", "elements": buttons},
    ]
    return elicitation.message, blocks


_EMOJI = {"approved": ":white_check_mark:", "denied": ":no_entry_sign:", "expired": ":hourglass:"}


def ended_label(elicitation: Elicitation) -> str:
    """How an approval ended, as its messages say it: Approved by carol, Denied by carol: reason, Expired, ..."""
    kind, words = how_it_ended(elicitation)
    return f"{_MARKS.get(kind, _MARKS['cancelled'])} {words}"


def ended_message(elicitation: Elicitation) -> tuple[str, list[Block]]:
    """The direct message once the approval has ended: its buttons gone, its end said."""
    label = escape(ended_label(elicitation))
    blocks: list[Block] = [*_about(elicitation), {"type": "context", "elements": [{"type": "mrkdwn", "text": label}]}]
    return f"{elicitation.message} ({label.split(' ', 1)[1]})", blocks


def waiting_message(asked: str) -> tuple[str, list[Block]]:
    """What the requester's thread shows of an approval others answer: that the call waits, nothing to press."""
    text = f"Waiting for approval by {asked}."
    return text, [{"type": "section", "text": mrkdwn(text)}]


def waited_message(text: str, elicitation: Elicitation) -> tuple[str, list[Block]]:
    """The requester's note once the approval has ended."""
    label = escape(ended_label(elicitation))
    blocks: list[Block] = [
        {"type": "section", "text": mrkdwn(text)},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": label}]},
    ]
    return f"{text} ({label.split(' ', 1)[1]})", blocks


def reminder(elicitation: Elicitation) -> str:
    """A reply in the thread of an approver's direct message."""
    return f"Reminder: {elicitation.message}"


def deny_schema(elicitation: Elicitation) -> dict[str, Any]:
    """The Deny modal's form: the approval's optional reason only."""
    reason = ((elicitation.requested_schema or {}).get("properties") or {}).get("reason") or {"type": "string"}
    return {"title": "Deny this call", "type": "object", "properties": {"reason": reason}}


def deny_view(elicitation: Elicitation) -> Block:
    return form_view(f"deny:{elicitation.id}", elicitation.message, deny_schema(elicitation), APPROVAL_FORM)


def edit_schema(elicitation: Elicitation) -> dict[str, Any]:
    """The approval's form as its Edit… modal shows it: approving ticked (the approver came to edit, then approve)."""
    schema = dict(elicitation.requested_schema or {})
    properties = dict(schema.get("properties") or {})
    properties["approve"] = {**properties.get("approve", {"type": "boolean"}), "default": True}
    return {**schema, "title": "Approve with edits", "properties": properties}


def edit_view(elicitation: Elicitation) -> Block:
    return form_view(f"edit:{elicitation.id}", elicitation.message, edit_schema(elicitation), APPROVAL_FORM)


def modal_schema(kind: str, elicitation: Elicitation) -> dict[str, Any]:
    """The form of the modal `kind` (the `deny` or `edit` of its metadata)."""
    return deny_schema(elicitation) if kind == "deny" else edit_schema(elicitation)
