"""Approvals as plain values: who may answer, what the form asks, and what an approver's edits become."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from elicithub.core.approval import Approval, People, approval_schema, edited
from elicithub.core.elicitation import Answer, Elicitation, Invalid, Resolve, decide, new_elicitation, utcnow
from elicithub.core.schema import FieldError, validate_requested_schema

TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "service": {"type": "string", "title": "Service"},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
        "force": {"type": "boolean"},
        "labels": {"type": "object"},
    },
    "required": ["service"],
}
ARGUMENTS = {"service": "orders", "replicas": 2, "force": False, "labels": {"team": "a"}}
OPS = People(groups=("ops",))


def approval_of(arguments: dict[str, object], approval: Approval) -> Elicitation:
    question = new_elicitation(
        conversation_id="c",
        user_id="alice",
        run_id="r",
        mode="form",
        message="alice asks to call ops.restart. Approve this call?",
        timeout_s=60,
        requested_schema=approval_schema(arguments, approval.tool_schema, allow_edit=approval.tool_schema is not None),
        context={"trigger": "approval", "arguments": arguments, "requester": "alice"},
    )
    return replace(question, approval=approval)


def test_approvers_answer_and_everyone_else_does_not() -> None:
    approval = Approval(OPS)
    now = utcnow()
    assert approval.standing("bob", {"ops"}, "alice", now) == "answers"
    assert approval.standing("dave", {"dev"}, "alice", now) == "none"
    assert approval.standing(None, {"ops"}, "alice", now) == "none"
    assert approval.standing("alice", set(), "alice", now) == "none"  # the requester, and no approver


def test_a_requester_who_is_an_approver_may_answer_only_with_self_approval() -> None:
    now = utcnow()
    assert Approval(OPS).standing("alice", {"ops"}, "alice", now) == "self"
    assert Approval(OPS, self_approval=True).standing("alice", {"ops"}, "alice", now) == "answers"


def test_the_requester_answers_an_approval_of_requester() -> None:
    now = utcnow()
    assert Approval(None).standing("alice", set(), "alice", now) == "answers"
    assert Approval(None).standing("bob", {"ops"}, "alice", now) == "none"


def test_escalation_is_a_matter_of_time() -> None:
    now = utcnow()
    approval = Approval(OPS, escalate_to=People(("dave",)), escalate_at=now + timedelta(seconds=30))
    assert approval.standing("dave", set(), "alice", now) == "none"
    assert approval.standing("dave", set(), "alice", now + timedelta(seconds=30)) == "answers"
    assert approval.standing("bob", {"ops"}, "alice", now) == "answers"


def test_the_form_has_a_field_per_top_level_primitive_argument_with_its_value_as_default() -> None:
    schema = approval_schema(ARGUMENTS, TOOL_SCHEMA, allow_edit=True)
    validate_requested_schema(schema)
    properties = schema["properties"]
    assert list(properties) == ["approve", "reason", "service", "replicas", "force"]  # no object field
    assert properties["approve"]["type"] == "boolean" and schema["required"] == ["approve"]
    assert properties["service"] == {"type": "string", "title": "Service", "default": "orders"}
    assert properties["replicas"]["default"] == 2 and properties["replicas"]["maximum"] == 10
    assert list(approval_schema(ARGUMENTS, TOOL_SCHEMA, allow_edit=False)["properties"]) == ["approve", "reason"]


def test_an_argument_named_like_a_decision_field_is_not_editable() -> None:
    schema = approval_schema({"reason": "because", "n": 1}, None, allow_edit=True)
    assert schema["properties"]["reason"]["type"] == "string" and "default" not in schema["properties"]["reason"]
    assert schema["properties"]["n"] == {"type": "integer", "title": "n", "default": 1}


def test_edits_replace_only_the_arguments_given() -> None:
    assert edited(ARGUMENTS, {"approve": True, "reason": "ok", "replicas": 3, "other": 1}) == {
        **ARGUMENTS,
        "replicas": 3,
    }


def test_an_edit_the_tools_schema_refuses_is_invalid_and_names_the_field() -> None:
    question = approval_of(ARGUMENTS, Approval(OPS, tool_schema=TOOL_SCHEMA))
    answer = Answer("accept", {"approve": True, "replicas": 11}, by="bob")
    decision = decide(question, answer, utcnow())
    assert isinstance(decision, Invalid)
    assert [e.field for e in decision.errors] == ["replicas"]
    assert isinstance(decide(question, Answer("accept", {"approve": True, "replicas": 3}, by="bob"), utcnow()), Resolve)


def test_an_edit_of_the_wrong_type_fails_the_form_first() -> None:
    question = approval_of(ARGUMENTS, Approval(OPS, tool_schema=TOOL_SCHEMA))
    decision = decide(question, Answer("accept", {"approve": True, "replicas": "three"}, by="bob"), utcnow())
    assert isinstance(decision, Invalid) and decision.errors == [FieldError("replicas", decision.errors[0].message)]


def test_an_approval_and_its_answerer_survive_the_stored_form() -> None:
    now = utcnow()
    approval = Approval(OPS, False, People(("dave",)), now, "approve", False, TOOL_SCHEMA)
    question = replace(approval_of(ARGUMENTS, approval), answer=Answer("accept", {"approve": True}, by="bob"))
    again = Elicitation.from_json(question.to_json())
    assert again == question and again.answered_by == "bob" and not again.asks_requester


def test_a_second_approver_with_the_same_answer_is_a_conflict() -> None:
    question = approval_of(ARGUMENTS, Approval(OPS))
    decision = decide(question, Answer("accept", {"approve": True}, by="bob"), utcnow())
    assert isinstance(decision, Resolve)
    ended = replace(question, state=decision.state, answer=decision.answer)
    assert type(decide(ended, Answer("accept", {"approve": True}, by="bob"), utcnow())).__name__ == "Repeat"
    assert type(decide(ended, Answer("accept", {"approve": True}, by="carol"), utcnow())).__name__ == "Conflict"
