"""The AI SDK UI message stream's parts: each is the JSON its named shape says (mypy checks the code that builds
them; this checks what a run's events become), and a streamed turn's parts open and close as the AI SDK requires
(a delta only inside its part, every part closed before its step ends)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import get_args, get_type_hints

from elicithub.core.approval import Approval, People
from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    ModelStatus,
    ReasoningDelta,
    RunFinished,
    RunPaused,
    RunStarted,
    StepStarted,
    StreamEvent,
    TextDelta,
    TokenUsage,
    ToolCallFinished,
    ToolInputDelta,
    ToolStatus,
)
from elicithub.core.runs import ToolCall
from elicithub.surfaces.chat.ui_parts import UIPart
from elicithub.surfaces.chat.ui_stream import UIMessageStreamWriter
from tests.core_fixtures import question
from tests.shapes import assert_shaped

SHAPES = {kind: shape for shape in get_args(UIPart) for kind in get_args(get_type_hints(shape)["type"])}


def parts(writer: UIMessageStreamWriter, *events: StreamEvent) -> list[dict[str, object]]:
    lines = [*writer.start(), *(line for event in events for line in writer.write(event))]
    return [json.loads(line) for line in lines if line != "[DONE]"]


def test_every_part_a_run_writes_has_the_keys_of_its_shape() -> None:
    call = ToolCall("call_1", "ops.restart", {"service": "orders"})
    own = replace(question(), approval=Approval())
    routed = replace(question(), approval=Approval(People(("carol",)), requester_answers=False))
    sign_in = question(url="http://127.0.0.1:8700/auth/connect?t=x")
    run: list[StreamEvent] = [
        RunStarted("msg_1"),
        StepStarted(),
        ModelStatus("Model gpt is busy; retrying in 3 s."),
        ReasoningDelta("A restart, then."),
        TextDelta("Restarting"),
        ToolInputDelta("call_1", "ops.restart", '{"service": ', first=True),
        ToolInputDelta("call_1", "ops.restart", '"orders"}', first=False),
        call,
        ToolStatus("call_1", "draining"),
        ElicitationRequested(sign_in),
        ElicitationResolved(sign_in.id, "accepted"),
        ElicitationRequested(routed),
        ElicitationResolved(routed.id, "accepted", answered_by="carol"),
        ToolCallFinished("call_1", "ops.restart", "restarted", False),
        StepStarted(),
        call,
        ElicitationRequested(own),
        ToolCallFinished("call_1", "ops.restart", "boom", True),
        RunFinished(),
    ]
    written = parts(UIMessageStreamWriter("msg_1"), *run)
    written += parts(UIMessageStreamWriter("msg_2", native_approvals=True), *run[:12], ElicitationRequested(own))
    denied = UIMessageStreamWriter("msg_4", continues="call_1", denied=True)
    written += parts(denied, call, ToolCallFinished("call_1", "ops.restart", "not approved", True))
    cut = UIMessageStreamWriter("msg_5")
    written += parts(cut, StepStarted(), ToolInputDelta("call_2", "ops.restart", "{", first=True), RunFinished())
    assert {p["type"] for p in written} == set(SHAPES)  # every shape is written somewhere here
    for part in written:
        assert_shaped(part, SHAPES[str(part["type"])])


def kinds(written: list[dict[str, object]]) -> list[str]:
    return [str(p["type"]) for p in written]


def test_a_turn_s_text_is_one_part_however_many_pieces_and_thinking_another() -> None:
    written = parts(
        UIMessageStreamWriter("msg_1"),
        StepStarted("turn_1"),
        ReasoningDelta("Orders "),
        ReasoningDelta("is a service."),
        TextDelta("Let "),
        TextDelta("me "),
        TextDelta("see."),
        TokenUsage(12, 3),
        StepStarted("turn_2"),
        TextDelta("Done."),
        RunFinished(),
    )
    assert kinds(written) == [
        "start",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    reasoning, text, second = written[2], written[6], written[13]
    assert [p["id"] for p in written[2:6]] == [reasoning["id"]] * 4
    assert [p["id"] for p in written[6:11]] == [text["id"]] * 5
    assert len({reasoning["id"], text["id"], second["id"]}) == 3
    assert "".join(str(p["delta"]) for p in written[7:10]) == "Let me see."


def test_text_after_thinking_after_text_opens_a_new_part_each_time() -> None:
    written = parts(
        UIMessageStreamWriter("msg_1"),
        StepStarted("turn_1"),
        TextDelta("First."),
        ReasoningDelta("Hm."),
        TextDelta("Second."),
        RunFinished(),
    )
    assert kinds(written)[2:11] == [
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
    ]
    assert written[2]["id"] != written[8]["id"]


def test_a_call_s_arguments_stream_then_its_input_comes_whole_without_a_second_start() -> None:
    call = ToolCall("call_1", "mrtr.provision", {"name": "orders"})
    written = parts(
        UIMessageStreamWriter("msg_1"),
        StepStarted("turn_1"),
        TextDelta("Provisioning."),
        ToolInputDelta("call_1", "mrtr.provision", "", first=True),
        ToolInputDelta("call_1", "mrtr.provision", '{"name": ', first=False),
        ToolInputDelta("call_1", "mrtr.provision", '"orders"}', first=False),
        call,
        ToolCallFinished("call_1", "mrtr.provision", "done", False),
        RunFinished(),
    )
    assert kinds(written)[2:10] == [
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
    ]
    assert written[5] == {
        "type": "tool-input-start",
        "toolCallId": "call_1",
        "toolName": "mrtr.provision",
        "dynamic": True,
    }
    assert "".join(str(p["inputTextDelta"]) for p in written[6:8]) == '{"name": "orders"}'
    assert written[8]["input"] == {"name": "orders"}
    assert "tool-input-error" not in kinds(written)


def test_a_reader_that_missed_a_call_s_first_piece_gets_its_input_whole() -> None:
    written = parts(
        UIMessageStreamWriter("msg_1"),
        StepStarted("turn_1"),
        ToolInputDelta("call_1", "mrtr.provision", '"orders"}', first=False),
        ToolCall("call_1", "mrtr.provision", {"name": "orders"}),
    )
    assert kinds(written) == ["start", "start-step", "tool-input-available"]


def test_a_call_whose_input_streamed_but_was_never_made_ends_in_an_input_error() -> None:
    """A stop cut the turn, or the model failed mid-call: the call's part does not stay streaming forever."""
    streamed = ToolInputDelta("call_1", "mrtr.provision", '{"na', first=True)
    written = parts(UIMessageStreamWriter("msg_1"), StepStarted("turn_1"), streamed, RunFinished("superseded"))
    ended = ["tool-input-start", "tool-input-delta", "tool-input-error", "finish-step", "finish"]
    assert kinds(written) == ["start", "start-step", *ended]
    assert written[4]["input"] == '{"na' and written[4]["toolName"] == "mrtr.provision"
    # A run asked again after a crash starts a new turn: the old turn's unmade call ends there.
    again = parts(UIMessageStreamWriter("msg_2"), StepStarted("turn_1"), streamed, StepStarted("turn_2"))
    assert kinds(again)[-3:] == ["tool-input-error", "finish-step", "start-step"]


def test_a_stream_that_ends_at_a_pause_leaves_the_calls_still_to_come_alone() -> None:
    own = replace(question(), approval=Approval())
    writer = UIMessageStreamWriter("msg_1", native_approvals=True)
    written = parts(
        writer,
        StepStarted("turn_1"),
        ToolInputDelta("call_2", "ops.restart", "{}", first=True),
        ToolCall("call_1", "ops.restart", {}),
        ElicitationRequested(own),
        RunPaused((own.id,)),
    )
    assert writer.ended
    assert "tool-input-error" not in kinds(written) and kinds(written)[-2:] == ["finish-step", "finish"]


def test_a_replayed_turn_shows_its_thinking_and_text_whole_then_its_calls() -> None:
    """What a reader that follows after the turn ended gets (runtime/stream.py): the turn's end brings it whole."""
    written = parts(
        UIMessageStreamWriter("msg_1"),
        RunStarted("msg_1"),
        StepStarted("turn_1"),
        ModelStatus("Model gpt is busy; retrying in 1 s."),
        ReasoningDelta("Thought through."),
        TextDelta("Let me look."),
        TokenUsage(10, 5),
        ToolCall("call_1", "mrtr.provision", {"name": "orders"}),
        RunFinished(),
    )
    assert kinds(written) == [
        "start",
        "start-step",
        "data-model-status",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-available",
        "finish-step",
        "finish",
    ]
    assert written[2] == {
        "type": "data-model-status",
        "data": {"message": "Model gpt is busy; retrying in 1 s."},
        "transient": True,
    }
    assert written[7]["delta"] == "Let me look."


def test_pieces_of_a_turn_whose_start_the_reader_did_not_see_open_a_step() -> None:
    """A reader that reattached mid-turn after the turn's start gets the text so far first."""
    written = parts(UIMessageStreamWriter("msg_1"), TextDelta("so far"), TextDelta(" and on"), RunFinished())
    text = ["text-start", "text-delta", "text-delta", "text-end"]
    assert kinds(written) == ["start", "start-step", *text, "finish-step", "finish"]
