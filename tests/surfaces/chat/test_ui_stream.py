"""The AI SDK UI message stream's parts: each is the JSON its named shape says (mypy checks the code that builds
them; this checks what a run's events become)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import get_args, get_type_hints

from elicithub.core.approval import Approval, People
from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    RunFinished,
    RunStarted,
    StepStarted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolStatus,
)
from elicithub.core.runs import ToolCall
from elicithub.surfaces.chat.ui_stream import UIMessageStreamWriter, UIPart
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
        TextDelta("Restarting"),
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
    assert {p["type"] for p in written} == set(SHAPES)  # every shape is written somewhere here
    for part in written:
        assert_shaped(part, SHAPES[str(part["type"])])
