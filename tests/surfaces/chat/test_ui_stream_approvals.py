"""The UI message stream writer with AI SDK native approvals, on plain events: which questions become a
`tool-approval-request`, when the stream ends before its run, and how the answered call's part ends."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from elicithub.core.approval import Approval, People
from elicithub.core.elicitation import Elicitation
from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    RunPaused,
    StreamEvent,
    ToolCallFinished,
)
from elicithub.core.runs import ToolCall
from elicithub.surfaces.chat.ui_stream import UIMessageStreamWriter
from tests.core_fixtures import question

CALL = ToolCall("call_7", "ops.restart", {"service": "orders"})


def approval(**changes: Any) -> Elicitation:
    """An approval of alice's call of ops.restart that she answers herself (approvers: requester)."""
    context = {"trigger": "approval", "serverId": "ops", "toolName": "restart", "requester": "alice"}
    return replace(question(context=context), approval=Approval(**changes))


def written(writer: UIMessageStreamWriter, *events: StreamEvent) -> list[Any]:
    lines = [line for event in events for line in writer.write(event)]
    return [line if line == "[DONE]" else json.loads(line) for line in lines]


def test_a_requester_approval_is_a_tool_approval_request_and_its_pause_ends_the_stream() -> None:
    asked = approval()
    writer = UIMessageStreamWriter("run_1", native_approvals=True)
    parts = written(writer, CALL, ElicitationRequested(asked), RunPaused((asked.id,)))
    assert {"type": "tool-approval-request", "approvalId": asked.id, "toolCallId": "call_7"} in parts
    assert not any(p != "[DONE]" and p["type"].startswith("data-") for p in parts)
    assert [p if p == "[DONE]" else p["type"] for p in parts[-3:]] == ["finish-step", "finish", "[DONE]"]
    assert writer.ended


def test_without_the_option_an_approval_is_the_data_part_it_always_was() -> None:
    asked = approval()
    writer = UIMessageStreamWriter("run_1")
    parts = written(writer, CALL, ElicitationRequested(asked), RunPaused((asked.id,)))
    assert [p["type"] for p in parts] == ["start-step", "tool-input-available", "data-elicitation-request"]
    assert not writer.ended


def test_questions_no_native_approval_answers_stay_data_parts_and_the_stream_goes_on() -> None:
    others = approval(approvers=People(groups=("ops",)), requester_answers=False)
    form = question()
    for asked, kind in [(others, "data-approval-pending"), (form, "data-elicitation-request")]:
        writer = UIMessageStreamWriter("run_1", native_approvals=True)
        parts = written(writer, CALL, ElicitationRequested(asked), RunPaused((asked.id,)))
        assert parts[-1]["type"] == kind and not writer.ended


def test_a_round_that_also_waits_on_another_question_does_not_end_the_stream() -> None:
    asked, form = approval(), question()
    writer = UIMessageStreamWriter("run_1", native_approvals=True)
    written(writer, CALL, ElicitationRequested(asked), ElicitationRequested(form), RunPaused((asked.id, form.id)))
    assert not writer.ended


def test_an_approval_outside_a_call_this_stream_showed_stays_a_data_part() -> None:
    asked = approval()
    writer = UIMessageStreamWriter("run_1", native_approvals=True)  # read again from after the call's start
    parts = written(writer, ElicitationRequested(asked), RunPaused((asked.id,)))
    assert parts[-1]["type"] == "data-elicitation-request" and not writer.ended


def test_read_again_an_approval_answered_since_is_passed_over_and_the_run_goes_on() -> None:
    answered, waiting = approval(), approval()
    writer = UIMessageStreamWriter("run_1", native_approvals=True, still_open=[waiting.id])
    parts = written(writer, CALL, ElicitationRequested(answered), RunPaused((answered.id,)))
    assert parts[-1]["type"] == "data-elicitation-request" and not writer.ended
    finished = ToolCallFinished("call_7", "ops.restart", "Restarted orders.", False)
    again = ToolCall("call_8", "ops.restart", {"service": "orders"})
    parts = written(writer, finished, again, ElicitationRequested(waiting), RunPaused((waiting.id,)))
    assert {"type": "tool-approval-request", "approvalId": waiting.id, "toolCallId": "call_8"} in parts
    assert writer.ended


def test_the_answers_stream_continues_the_message_in_its_step_and_a_denied_call_is_output_denied() -> None:
    asked = approval()
    writer = UIMessageStreamWriter("msg_client", native_approvals=True, continues="call_7", denied=True)
    refusal = "Call of ops.restart was not approved: denied by alice: no"
    parts = written(
        writer,
        CALL,
        ElicitationResolved(asked.id, "accepted"),
        ToolCallFinished("call_7", "ops.restart", refusal, True),
    )
    assert writer.start() == ['{"type":"start","messageId":"msg_client"}']
    # The client's message holds the call's part: its input is not sent again, and no new step starts.
    assert [p["type"] for p in parts] == ["data-elicitation-resolved", "tool-output-denied"]
    assert parts[-1] == {"type": "tool-output-denied", "toolCallId": "call_7"}
    # A later call of the same id (a later step's) is a new one, and its error an error.
    parts = written(writer, CALL, ToolCallFinished("call_7", "ops.restart", "boom", True))
    assert [p["type"] for p in parts] == ["tool-input-available", "tool-output-error"]


def test_a_call_approved_then_failing_is_an_output_error() -> None:
    writer = UIMessageStreamWriter("msg_client", native_approvals=True, continues="call_7")
    parts = written(writer, CALL, ToolCallFinished("call_7", "ops.restart", "boom", True))
    assert parts[-1] == {"type": "tool-output-error", "toolCallId": "call_7", "errorText": "boom", "dynamic": True}
