"""Approvals as plain values: who may answer a question about someone else's tool call, and what an approver's edits
of its arguments become (checked against the tool's own input schema)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.schema import FieldError, SchemaError, validate_requested_schema

OnTimeout = Literal["deny", "approve", "cancel"]
Standing = Literal["answers", "self", "none"]
"""How a person stands to an approval: may answer it; is its requester and an approver, without self-approval (403);
or it does not exist for them (404)."""


class PeopleJson(TypedDict):
    """`People` as stored, and as an `approval-pending` event names the approvers."""

    users: list[str]
    groups: list[str]


class ApprovalJson(TypedDict):
    """`Approval` as stored, with its question and on the inbox's log."""

    approvers: PeopleJson | None
    self_approval: bool
    escalate_to: PeopleJson | None
    escalate_at: str | None
    on_timeout: OnTimeout
    requester_answers: bool
    tool_schema: JsonObject | None


DECISION_FIELDS = ("approve", "reason")
"""The approval form's own fields; a tool argument of one of these names is not editable."""

_EDITABLE_KEYWORDS = ("enum", "minimum", "maximum", "minLength", "maxLength", "format", "description")
_TYPES: dict[type, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}


@dataclass(frozen=True)
class People:
    """Some users and groups (of the hub's `groups:`, or the identity provider's)."""

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    def include(self, user_id: str, groups: Collection[str]) -> bool:
        return user_id in self.users or any(g in groups for g in self.groups)

    def to_json(self) -> PeopleJson:
        return {"users": list(self.users), "groups": list(self.groups)}

    @classmethod
    def from_json(cls, data: PeopleJson) -> People:
        return cls(tuple(data.get("users") or ()), tuple(data.get("groups") or ()))


@dataclass(frozen=True)
class Approval:
    """How a question that approves a tool call is routed. `approvers` None: the requester approves (an ordinary
    question of theirs). `escalate_to` may answer too from `escalate_at` on (a pure function of time: nothing is
    written when it escalates). `requester_answers`: the requester is an approver who may approve their own call
    (known when it was asked), so their own stream shows it as a question to answer. `tool_schema`: with editing,
    the tool's input schema, which the edited arguments must satisfy before the answer is taken."""

    approvers: People | None = None
    self_approval: bool = False
    escalate_to: People | None = None
    escalate_at: datetime | None = None
    on_timeout: OnTimeout = "deny"
    requester_answers: bool = True
    tool_schema: JsonObject | None = None

    def escalated(self, now: datetime) -> bool:
        return self.escalate_to is not None and self.escalate_at is not None and now >= self.escalate_at

    def standing(self, user_id: str | None, groups: Collection[str], requester: str, now: datetime) -> Standing:
        if user_id is None:
            return "none"
        if self.approvers is None:
            return "answers" if user_id == requester else "none"
        approver = self.approvers.include(user_id, groups) or (
            self.escalated(now) and self.escalate_to is not None and self.escalate_to.include(user_id, groups)
        )
        if not approver:
            return "none"
        if user_id == requester and not self.self_approval:
            return "self"
        return "answers"

    def to_json(self) -> ApprovalJson:
        return {
            "approvers": None if self.approvers is None else self.approvers.to_json(),
            "self_approval": self.self_approval,
            "escalate_to": None if self.escalate_to is None else self.escalate_to.to_json(),
            "escalate_at": None if self.escalate_at is None else self.escalate_at.isoformat(),
            "on_timeout": self.on_timeout,
            "requester_answers": self.requester_answers,
            "tool_schema": self.tool_schema,
        }

    @classmethod
    def from_json(cls, data: ApprovalJson) -> Approval:
        approvers, escalate_to, escalate_at = data.get("approvers"), data.get("escalate_to"), data.get("escalate_at")
        return cls(
            approvers=None if approvers is None else People.from_json(approvers),
            self_approval=bool(data.get("self_approval")),
            escalate_to=None if escalate_to is None else People.from_json(escalate_to),
            escalate_at=None if escalate_at is None else datetime.fromisoformat(escalate_at),
            on_timeout=data.get("on_timeout", "deny"),
            requester_answers=bool(data.get("requester_answers", True)),
            tool_schema=data.get("tool_schema"),
        )

    def edit_errors(self, arguments: JsonObject, content: Mapping[str, Any]) -> list[FieldError]:
        """What is wrong with the arguments as edited, by the tool's input schema: one error per field."""
        if self.tool_schema is None:
            return []
        import jsonschema  # by the first edited approval, not by every hub's start

        errors: dict[str, str] = {}
        validator = jsonschema.Draft202012Validator(self.tool_schema)
        for error in validator.iter_errors(edited(arguments, content)):
            field = str(error.path[0]) if error.path else ""
            errors.setdefault(field, error.message)
        return [FieldError(field, message) for field, message in errors.items()]


def edited(arguments: JsonObject, content: Mapping[str, Any] | None) -> JsonObject:
    """The call's arguments with the approver's values for those they could edit (the form's other fields)."""
    changes = {k: v for k, v in (content or {}).items() if k not in DECISION_FIELDS and k in arguments}
    return {**arguments, **changes}


def approval_schema(arguments: JsonObject, tool_schema: JsonObject | None, allow_edit: bool) -> JsonObject:
    """The approval's form: `approve`, an optional `reason` and, with `allow_edit`, one field per top-level
    primitive argument, its value as the default (constraints the tool's schema puts on it kept where a flat form
    can say them; the tool's schema is checked in full when the answer comes)."""
    properties: JsonObject = {
        "approve": {"type": "boolean", "title": "Approve this call"},
        "reason": {"type": "string", "title": "Reason", "description": "Optional; kept in the audit log."},
    }
    declared = (tool_schema or {}).get("properties") or {}
    for name, value in arguments.items() if allow_edit else ():
        kind = _TYPES.get(type(value))
        if kind is None or name in DECISION_FIELDS:
            continue
        found = declared.get(name)
        spec: JsonObject = found if isinstance(found, dict) else {}
        field: JsonObject = {"type": kind, "title": str(spec.get("title") or name), "default": value}
        if spec.get("type") == kind or (spec.get("type") == "number" and kind == "integer"):
            field["type"] = spec["type"]
            kept = {**field, **{k: spec[k] for k in _EDITABLE_KEYWORDS if spec.get(k) is not None}}
            field = kept if _flat({name: kept}) else field
        properties[name] = field
    return {"type": "object", "properties": properties, "required": ["approve"]}


def _flat(properties: JsonObject) -> bool:
    try:
        validate_requested_schema({"type": "object", "properties": properties})
    except SchemaError:
        return False
    return True
