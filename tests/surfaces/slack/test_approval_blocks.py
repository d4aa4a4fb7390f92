"""Block Kit for approvals, with plain values: the buttons an approver gets, and how each way an approval can end
reads in its messages."""

from __future__ import annotations

from typing import Any

import pytest

from elicithub.core.approval import Approval, People, approval_schema
from elicithub.core.elicitation import Answer, Elicitation, State, new_elicitation, resolved, utcnow
from elicithub.surfaces.slack.approval_blocks import (
    approval_message,
    ended_label,
    ended_message,
    reminder,
    waited_message,
)

ARGUMENTS: dict[str, Any] = {"service": "<orders>", "replicas": 2, "labels": ["a"]}


def approval(allow_edit: bool = True, arguments: dict[str, Any] | None = None) -> Elicitation:
    arguments = ARGUMENTS if arguments is None else arguments
    return new_elicitation(
        conversation_id="conv_1",
        user_id="alice",
        run_id="run_1",
        mode="form",
        message="alice asks to call ops.restart. Approve this call?",
        timeout_s=60,
        requested_schema=approval_schema(arguments, None, allow_edit),
        context={"trigger": "approval", "serverId": "ops", "toolName": "restart", "arguments": arguments},
        approval=Approval(People(groups=("ops",))),
    )


def ended(state: State, answer: Answer | None) -> Elicitation:
    return resolved(approval(), state, answer, utcnow())


def test_the_message_has_approve_and_deny_and_edit_only_with_an_editable_argument() -> None:
    _, shown = approval_message(approval(), "group ops")
    assert [b["text"]["text"] for b in shown[-1]["elements"]] == ["Approve", "Deny", "Edit…"]
    assert "&lt;orders&gt;" in shown[1]["text"]["text"]  # the arguments as written, escaped
    for without in (approval(allow_edit=False), approval(arguments={"labels": ["a"]})):
        _, shown = approval_message(without, "group ops")
        assert [b["text"]["text"] for b in shown[-1]["elements"]] == ["Approve", "Deny"]


@pytest.mark.parametrize("char", ["x", "<"])
def test_a_long_argument_is_shortened_visibly_and_no_escape_is_cut(char: str) -> None:
    _, shown = approval_message(approval(arguments={"notes": char * 5000}), "group ops")
    text = shown[1]["text"]["text"]
    assert 2900 < len(text) <= 3000 and text.endswith(f"{'&lt;' if char == '<' else 'x'}…```")


@pytest.mark.parametrize(
    ("state", "answer", "label"),
    [
        (State.ACCEPTED, Answer("accept", {"approve": True}, by="carol"), ":white_check_mark: Approved by carol"),
        (State.ACCEPTED, Answer("accept", {"approve": True, "reason": "ok"}, by="carol"), "Approved by carol: ok"),
        (State.ACCEPTED, Answer("accept", {"approve": False, "reason": "no <b>"}, by="bob"), "Denied by bob: no <b>"),
        (State.ACCEPTED, Answer("accept", {"approve": False}, by="bob"), ":no_entry_sign: Denied by bob"),
        (State.DECLINED, Answer("decline", by="bob"), ":no_entry_sign: Denied by bob"),
        (State.EXPIRED, None, ":hourglass: Expired"),
        (State.CANCELLED, Answer("cancel", by="bob"), ":heavy_multiplication_x: Cancelled by bob"),
        (State.CANCELLED, None, ":heavy_multiplication_x: Cancelled"),
    ],
)
def test_each_end_reads_as_who_did_what(state: State, answer: Answer | None, label: str) -> None:
    assert ended_label(ended(state, answer)).endswith(label)


def test_an_ended_message_has_no_buttons_and_escapes_the_reason() -> None:
    denied = Answer("accept", {"approve": False, "reason": "<@U1>"}, by="bob")
    text, shown = ended_message(ended(State.ACCEPTED, denied))
    assert all(b["type"] != "actions" for b in shown)
    assert shown[-1]["elements"][0]["text"] == ":no_entry_sign: Denied by bob: &lt;@U1&gt;"
    assert text.endswith("(Denied by bob: &lt;@U1&gt;)")
    note, noted = waited_message("Waiting for approval by group ops.", ended(State.EXPIRED, None))
    assert note == "Waiting for approval by group ops. (Expired)" and len(noted) == 2


def test_a_reminder_repeats_the_request() -> None:
    assert reminder(approval()) == "Reminder: alice asks to call ops.restart. Approve this call?"
