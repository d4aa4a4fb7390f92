"""Questions as AG-UI interrupts and resume entries as answers, with no server: approvals (built by hand, in the shape
DESIGN.md v4 gives them) as `tool_call` in AG-UI's `approved` / `editedArgs` / `reason` shape."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import Interrupt, ResumeEntry

from elicithub.core.elicitation import Answer, Elicitation, QuestionContext, Resolve, decide, new_elicitation, utcnow
from elicithub.surfaces.chat.agui_interrupts import BadPayload, answer_of, interrupt

ARGUMENTS = {"service": "orders", "replicas": 2}


def approval(*, allow_edit: bool) -> Elicitation:
    """An approval as the approvals trigger asks it: `approve`, optional `reason`, and with `allow_edit` one field
    per top-level primitive argument carrying its value as default."""
    properties: dict[str, Any] = {"approve": {"type": "boolean", "title": "Approve"}, "reason": {"type": "string"}}
    if allow_edit:
        properties["service"] = {"type": "string", "default": "orders"}
        properties["replicas"] = {"type": "integer", "default": 2}
    context: QuestionContext = {"trigger": "approval", "serverId": "deploy", "toolName": "deploy_service"}
    context["arguments"] = ARGUMENTS  # type: ignore[typeddict-unknown-key]
    context["requester"] = "bob"  # type: ignore[typeddict-unknown-key]
    return new_elicitation(
        conversation_id="c",
        user_id="alice",
        run_id="r",
        mode="form",
        message="Approve deploy.deploy_service for bob?",
        timeout_s=60,
        requested_schema={"type": "object", "properties": properties, "required": ["approve"]},
        context=context,
    )


def resume(interrupt_id: str, payload: Any = None, status: str = "resolved") -> ResumeEntry:
    return ResumeEntry.model_validate({"interruptId": interrupt_id, "status": status, "payload": payload})


def test_an_approval_is_a_tool_call_interrupt_on_its_call_with_approved_and_reason() -> None:
    asked = approval(allow_edit=False)

    shown = interrupt(asked, "call_7")

    assert isinstance(shown, Interrupt)
    assert (shown.reason, shown.tool_call_id, shown.message) == ("tool_call", "call_7", asked.message)
    assert shown.response_schema == {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
        "required": ["approved"],
    }
    assert shown.metadata == {"context": asked.context}


def test_an_editable_approval_offers_edited_args_of_the_editable_arguments() -> None:
    shown = interrupt(approval(allow_edit=True), "call_7")

    assert shown.response_schema is not None
    edited = shown.response_schema["properties"]["editedArgs"]
    assert edited["type"] == "object"
    assert edited["properties"] == {
        "service": {"type": "string", "default": "orders"},
        "replicas": {"type": "integer", "default": 2},
    }


@pytest.mark.parametrize(
    ("payload", "content"),
    [
        ({"approved": True}, {"approve": True}),
        ({"approved": False, "reason": "not on a Friday"}, {"approve": False, "reason": "not on a Friday"}),
        ({"approved": True, "editedArgs": {"replicas": 3}}, {"approve": True, "replicas": 3}),
        (
            {"approved": True, "editedArgs": {"replicas": 3.0, "service": "web"}},
            {"approve": True, "replicas": 3, "service": "web"},
        ),
    ],
)
def test_an_approvals_resume_is_our_approve_reason_and_arguments(payload: Any, content: Any) -> None:
    asked = approval(allow_edit=True)

    answer = answer_of(asked, resume(asked.id, payload))

    assert answer == Answer("accept", content)
    assert isinstance(decide(asked, answer, utcnow()), Resolve)  # the approval's own schema takes it


@pytest.mark.parametrize(
    ("allow_edit", "payload", "problem"),
    [
        (False, {}, "approved: a boolean is required"),
        (False, {"approved": "yes"}, "approved: a boolean is required"),
        (False, {"approved": True, "editedArgs": {"replicas": 3}}, "cannot be edited"),
        (True, {"approved": True, "editedArgs": {"region": "x"}}, "editedArgs.region"),
        (True, {"approved": True, "editedArgs": []}, "editedArgs: an object"),
        (False, {"approved": True, "reason": 3}, "reason: a string"),
        (False, {"approve": True}, "approve: not a field"),
        (False, "yes", "an object is required"),
    ],
)
def test_an_approval_payload_out_of_shape_is_refused(allow_edit: bool, payload: Any, problem: str) -> None:
    asked = approval(allow_edit=allow_edit)

    with pytest.raises(BadPayload, match=problem) as refused:
        answer_of(asked, resume(asked.id, payload))

    assert refused.value.code == "invalid_payload"


def test_a_cancelled_entry_cancels_whatever_the_question() -> None:
    asked = approval(allow_edit=False)

    assert answer_of(asked, resume(asked.id, status="cancelled")) == Answer("cancel")


def test_a_form_is_answered_with_its_payload_declined_with_the_decline_action() -> None:
    form = new_elicitation(
        conversation_id="c",
        user_id="alice",
        run_id="r",
        mode="form",
        message="Which region?",
        timeout_s=60,
        requested_schema={"type": "object", "properties": {"region": {"type": "string"}}},
        context={"trigger": "mcp_elicitation"},
    )

    assert interrupt(form, None).reason == "input_required"
    assert interrupt(form, None).tool_call_id is None
    assert answer_of(form, resume(form.id, {"region": "eu-west-1"})) == Answer("accept", {"region": "eu-west-1"})
    assert answer_of(form, resume(form.id, {"action": "decline"})) == Answer("decline")
