"""The elicitation model and its lifecycle rules, as plain values with no I/O."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Literal, NotRequired, TypedDict

from elicithub.core.approval import Approval, ApprovalJson
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.schema import FieldError, apply_defaults, validate_content

Mode = Literal["form", "url"]
Action = Literal["accept", "decline", "cancel"]


class QuestionContext(TypedDict, total=False):
    """Where a question comes from, for the person's client to show: `trigger` is `credential_required`,
    `mcp_elicitation`, `a2a_input_required` or `approval`; a delegated agent's questions name the `agentPath` that
    asks, outermost first; a sign-in that needs more than it has names its `scope`; an approval names the call's
    `arguments` and its `requester`."""

    trigger: str
    serverId: str
    toolName: str
    agentId: str
    taskId: str
    agentPath: list[str]
    scope: str
    arguments: JsonObject
    requester: str


class State(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    EXPIRED = "expired"

    @property
    def outcome(self) -> Outcome:
        """The outcome this terminal state stands for; KeyError for PENDING, which has not ended."""
        return _OUTCOMES[self]


Outcome = Literal["accepted", "declined", "cancelled", "expired"]
"""How an elicitation ended: the word of its terminal `State`."""

_OUTCOMES: dict[State, Outcome] = {
    State.ACCEPTED: "accepted",
    State.DECLINED: "declined",
    State.CANCELLED: "cancelled",
    State.EXPIRED: "expired",
}

_ACTION_STATE: dict[str, State] = {"accept": State.ACCEPTED, "decline": State.DECLINED, "cancel": State.CANCELLED}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(16)}"


def utcnow() -> datetime:
    return datetime.now(UTC)


class AnswerJson(TypedDict):
    action: Action
    content: JsonObject | None
    by: NotRequired[str]
    via: NotRequired[str]


@dataclass(frozen=True)
class Answer:
    """What a person said: an action, and for an accepted form its content (for an approval's decline, its
    `reason`); `by`: who said it, where someone other than the question's user may answer (an approval); `via`: the
    channel it came through (the surface: chat, mcp, a2a, agui, slack, email, ...), for the audit."""

    action: Action
    content: JsonObject | None = None
    by: str | None = None
    via: str | None = None

    def to_json(self) -> AnswerJson:
        data: AnswerJson = {"action": self.action, "content": self.content}
        if self.by is not None:
            data["by"] = self.by
        if self.via is not None:
            data["via"] = self.via
        return data


class ElicitationJson(TypedDict):
    """An `Elicitation` as stored, in an `elicitation-requested` event of a run's log and on the inbox's log (times
    in ISO 8601)."""

    id: str
    conversation_id: str
    user_id: str
    run_id: str
    mode: Mode
    message: str
    requested_schema: JsonObject | None
    url: str | None
    context: QuestionContext
    created_at: str
    expires_at: str
    state: str
    answer: AnswerJson | None
    resolved_at: str | None
    approval: NotRequired[ApprovalJson]


@dataclass(frozen=True)
class Elicitation:
    """One question to one person, owned by the run (`run_id`) that waits for it; an `approval` is a question about
    that person's tool call, routed to its approvers (core/approval.py)."""

    conversation_id: str
    user_id: str
    run_id: str
    mode: Mode
    message: str
    expires_at: datetime
    requested_schema: JsonObject | None = None
    url: str | None = None
    context: QuestionContext = field(default_factory=QuestionContext)
    id: str = field(default_factory=lambda: new_id("eli"))
    created_at: datetime = field(default_factory=utcnow)
    state: State = State.PENDING
    answer: Answer | None = None
    resolved_at: datetime | None = None
    approval: Approval | None = None

    @property
    def answered_by(self) -> str | None:
        return self.answer.by if self.answer is not None else None

    @property
    def asks_requester(self) -> bool:
        """Whether its own user answers it (every question but an approval routed to others)."""
        return self.approval is None or self.approval.requester_answers

    @property
    def outcome(self) -> Outcome | None:
        return None if self.state is State.PENDING else self.state.outcome

    def is_due(self, now: datetime) -> bool:
        return self.state is State.PENDING and now >= self.expires_at

    def to_json(self) -> ElicitationJson:
        data: ElicitationJson = {
            "id": self.id,
            "conversation_id": self.conversation_id,
            "user_id": self.user_id,
            "run_id": self.run_id,
            "mode": self.mode,
            "message": self.message,
            "requested_schema": self.requested_schema,
            "url": self.url,
            "context": self.context,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "state": self.state.value,
            "answer": None if self.answer is None else self.answer.to_json(),
            "resolved_at": None if self.resolved_at is None else self.resolved_at.isoformat(),
        }
        if self.approval is not None:
            data["approval"] = self.approval.to_json()
        return data

    @classmethod
    def from_json(cls, data: JsonObject) -> Elicitation:
        """From `to_json`'s form, or an earlier version's (whose run was its `stream_id`)."""
        answer = data.get("answer")
        resolved = data.get("resolved_at")
        approval = data.get("approval")
        return cls(
            id=data["id"],
            conversation_id=data["conversation_id"],
            user_id=data["user_id"],
            run_id=data.get("run_id") or data["stream_id"],
            mode=data["mode"],
            message=data["message"],
            requested_schema=data.get("requested_schema"),
            url=data.get("url"),
            context=data.get("context") or {},
            created_at=datetime.fromisoformat(data["created_at"]),
            expires_at=datetime.fromisoformat(data["expires_at"]),
            state=State(data["state"]),
            answer=None if answer is None else _answer(answer),
            resolved_at=None if resolved is None else datetime.fromisoformat(resolved),
            approval=None if approval is None else Approval.from_json(approval),
        )


def _answer(data: AnswerJson) -> Answer:
    return Answer(data["action"], data.get("content"), data.get("by"), data.get("via"))


def new_elicitation(
    *,
    conversation_id: str,
    user_id: str,
    run_id: str,
    mode: Mode,
    message: str,
    timeout_s: float,
    requested_schema: JsonObject | None = None,
    url: str | None = None,
    context: QuestionContext | None = None,
    approval: Approval | None = None,
) -> Elicitation:
    now = utcnow()
    return Elicitation(
        conversation_id=conversation_id,
        user_id=user_id,
        run_id=run_id,
        mode=mode,
        message=message,
        requested_schema=requested_schema,
        url=url,
        context=context or {},
        created_at=now,
        expires_at=now + timedelta(seconds=timeout_s),
        approval=approval,
    )


# Decisions: what answering a stored elicitation means, before anything is written.


@dataclass(frozen=True)
class Resolve:
    """Move the pending elicitation to `state`."""

    state: State
    answer: Answer | None


@dataclass(frozen=True)
class Repeat:
    """The same answer arrived again: report the existing outcome."""


@dataclass(frozen=True)
class Conflict:
    """Already resolved with another answer."""


@dataclass(frozen=True)
class Expire:
    """The answer came after the deadline: the elicitation expires instead."""


@dataclass(frozen=True)
class Invalid:
    """The content fails the requested schema; the elicitation stays pending."""

    errors: list[FieldError]


Decision = Resolve | Repeat | Conflict | Expire | Invalid


def _same_answer(a: Answer | None, b: Answer) -> bool:
    """Whether `b` repeats `a` (through whichever channel: the same person's same answer)."""
    if a is None or a.action != b.action or a.by != b.by:
        return False
    # A decline's content is what decide() kept of it: only an approval's reason.
    return b.action == "cancel" or (a.content or {}) == (b.content or {})


def decide(elicitation: Elicitation, answer: Answer, now: datetime) -> Decision:
    """The lifecycle rule for one answer: pending moves to exactly one terminal state.

    An accepted form gets the schema's defaults for the fields it leaves out, before it is judged (MCP 2025-11-25:
    the client applies them), so an answer and its repeat without those fields are the same answer.
    """
    schema = elicitation.requested_schema or {"type": "object", "properties": {}}
    if answer.action == "accept" and elicitation.mode == "form":
        filled = apply_defaults(schema, answer.content) if answer.content is not None else None
        answer = replace(answer, content=filled)
    if answer.action == "decline":
        answer = replace(answer, content=_kept_of_decline(elicitation, answer.content))
    if elicitation.state is State.EXPIRED:
        return Expire()
    if elicitation.state is not State.PENDING:
        return Repeat() if _same_answer(elicitation.answer, answer) else Conflict()
    if elicitation.is_due(now):
        return Expire()
    if answer.action == "accept" and elicitation.mode == "form":
        errors = validate_content(schema, answer.content)
        if not errors and elicitation.approval is not None:
            arguments = elicitation.context.get("arguments") or {}
            errors = elicitation.approval.edit_errors(arguments, answer.content or {})
        if errors:
            return Invalid(errors)
        return Resolve(State.ACCEPTED, answer)
    if answer.action == "decline":
        return Resolve(State.DECLINED, answer)
    # url mode carries no content; cancel never does.
    return Resolve(_ACTION_STATE[answer.action], Answer(answer.action, by=answer.by, via=answer.via))


def _kept_of_decline(elicitation: Elicitation, content: JsonObject | None) -> JsonObject | None:
    """A decline carries no content, but an approval's keeps its `reason` (a non-blank string): the call's refusal
    and the audit log say why it was not approved. Anything else it says is dropped."""
    reason = (content or {}).get("reason")
    if elicitation.approval is None or not isinstance(reason, str) or not reason.strip():
        return None
    return {"reason": reason}


def resolved(elicitation: Elicitation, state: State, answer: Answer | None, now: datetime) -> Elicitation:
    return replace(elicitation, state=state, answer=answer, resolved_at=now)
