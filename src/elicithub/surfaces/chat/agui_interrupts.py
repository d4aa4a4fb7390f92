"""The hub's questions as AG-UI 1.0 interrupts, and a resume entry as the answer it gives (DESIGN.md v4, "AG-UI").

A form is `input_required` with `responseSchema` = its schema; a sign-in (url mode) is `elicithub:sign_in` with
`metadata.url`; an approval (`context.trigger == "approval"`) is `tool_call`, in AG-UI's own `approved` /
`editedArgs` / `reason` shape. `toolCallId` is the call the run paused in; `metadata.context` the question's context.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import Interrupt, ResumeEntry

from elicithub.core.elicitation import Answer, Elicitation
from elicithub.core.jsoncodec import JsonObject, whole_numbers
from elicithub.errors import HubError

SIGN_IN = "elicithub:sign_in"
DECLINE = {"action": "decline"}
"""A form's `resolved` payload that declines it (a denial is the answer's own, AG-UI says, not a status)."""

APPROVAL_FIELDS = ("approve", "reason")
"""The fields of an approval's form that are not the call's arguments."""


class BadPayload(HubError):
    """A resume entry's payload does not fit its interrupt; `errors` name each field's problem."""

    code = "invalid_payload"

    def __init__(self, interrupt_id: str, errors: list[str]) -> None:
        super().__init__(f"resume payload for {interrupt_id}: " + "; ".join(errors))
        self.errors = errors


def interrupt(elicitation: Elicitation, tool_call_id: str | None) -> Interrupt:
    """The interrupt a run's open question is shown as."""
    expires_at = elicitation.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    metadata: JsonObject = {"context": dict(elicitation.context)}
    shown: dict[str, Any] = {
        "id": elicitation.id,
        "message": elicitation.message,
        "tool_call_id": tool_call_id,
        "expires_at": expires_at,
    }
    if is_approval(elicitation):
        return Interrupt(reason="tool_call", response_schema=approval_schema(elicitation), metadata=metadata, **shown)
    if elicitation.mode == "url":
        return Interrupt(reason=SIGN_IN, metadata={**metadata, "url": elicitation.url}, **shown)
    return Interrupt(reason="input_required", response_schema=elicitation.requested_schema, metadata=metadata, **shown)


def answer_of(elicitation: Elicitation, entry: ResumeEntry) -> Answer:
    """The answer a resume entry gives its question: `cancelled` cancels; `resolved` answers (a form with its
    payload as content, or `{"action": "decline"}`; a sign-in once done; an approval with `approved`)."""
    if entry.status == "cancelled":
        return Answer("cancel")
    payload = entry.payload
    if payload == DECLINE:
        return Answer("decline")
    if elicitation.mode == "url":
        return Answer("accept")
    if not isinstance(payload, dict):
        raise BadPayload(elicitation.id, ["payload: an object is required"])
    if is_approval(elicitation):
        return approval_answer(elicitation, payload)
    return Answer("accept", whole_numbers(payload))


# -- approvals: `{approved, editedArgs?, reason?}` on this surface, `{approve, reason?, <edited args>}` in the hub


def is_approval(elicitation: Elicitation) -> bool:
    return elicitation.mode == "form" and elicitation.context.get("trigger") == "approval"


def _editable(elicitation: Elicitation) -> JsonObject:
    """The arguments an approver may edit: the approval form's fields other than `approve` and `reason`."""
    properties = (elicitation.requested_schema or {}).get("properties") or {}
    return {name: schema for name, schema in properties.items() if name not in APPROVAL_FIELDS}


def approval_schema(elicitation: Elicitation) -> JsonObject:
    """`{approved, editedArgs?, reason?}`; `editedArgs` only when the approval lets its approvers edit."""
    properties: JsonObject = {"approved": {"type": "boolean"}}
    editable = _editable(elicitation)
    if editable:
        properties["editedArgs"] = {
            "type": "object",
            "description": "Full replacement of the tool arguments. Not merged.",
            "properties": editable,
        }
    properties["reason"] = {"type": "string"}
    return {"type": "object", "properties": properties, "required": ["approved"]}


def approval_answer(elicitation: Elicitation, payload: JsonObject) -> Answer:
    approved = payload.get("approved")
    errors = [] if isinstance(approved, bool) else ["approved: a boolean is required"]
    reason = payload.get("reason")
    if reason is not None and not isinstance(reason, str):
        errors.append("reason: a string is expected")
    edited = payload.get("editedArgs")
    editable = _editable(elicitation)
    if edited is not None and not isinstance(edited, dict):
        errors.append("editedArgs: an object is expected")
    elif edited and not editable:
        errors.append("editedArgs: this call's arguments cannot be edited")
    elif edited:
        wrong = [name for name in edited if name not in editable]
        errors.extend(f"editedArgs.{name}: not an argument that can be edited" for name in wrong)
    unknown = set(payload) - {"approved", "reason", "editedArgs"}
    errors.extend(f"{name}: not a field of this interrupt's response" for name in sorted(unknown))
    if errors:
        raise BadPayload(elicitation.id, errors)
    content: JsonObject = {"approve": approved, **whole_numbers(edited or {})}
    if reason is not None:
        content["reason"] = reason
    return Answer("accept", content)
