"""A run's events as the log keeps them and as streams show a question: each is the JSON its named shape says, the
same JSON as before the shapes were named, and it reads back as the event it was."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import get_args, get_type_hints

import pytest

from elicithub.core.approval import Approval, People
from elicithub.core.events import (
    ApprovalPendingEvent,
    ElicitationRequested,
    ElicitationResolved,
    RequestEvent,
    ResolvedEvent,
    RunFinished,
    RunPaused,
    RunStarted,
    StepStarted,
    StoredEvent,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolStatus,
    from_json,
    pending_event,
    request_event,
    resolved_event,
    to_json,
)
from elicithub.core.runs import ToolCall
from tests.core_fixtures import question
from tests.shapes import assert_shaped

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ASKED = replace(question(at=AT), id="eli_1", run_id="run_1")
EVENTS: list[StreamEvent] = [
    RunStarted("msg_1"),
    StepStarted(),
    TextDelta("hello"),
    ToolCall("call_1", "deploy.provision", {"region": "eu"}),
    ToolStatus("call_1", "provisioning"),
    ToolCallFinished("call_1", "deploy.provision", "done", False),
    ElicitationRequested(ASKED),
    ElicitationResolved("eli_1", "accepted"),
    ElicitationResolved("eli_1", "accepted", answered_by="carol"),
    RunPaused(("eli_1", "eli_2")),
    RunFinished("stop"),
]
SHAPES = {get_args(get_type_hints(shape)["type"])[0]: shape for shape in get_args(StoredEvent)}


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_each_stored_event_has_the_keys_of_its_shape(event: StreamEvent) -> None:
    stored = to_json(event)
    assert_shaped(stored, SHAPES[stored["type"]])


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_a_stored_event_reads_back_as_the_event_it_was(event: StreamEvent) -> None:
    assert from_json(json.loads(json.dumps(to_json(event)))) == event


def test_stored_events_are_the_json_they_were_before_their_shapes_were_named() -> None:
    written = [json.dumps(to_json(e), separators=(",", ":")) for e in EVENTS if not isinstance(e, ElicitationRequested)]
    assert written == [
        '{"type":"run-started","messageId":"msg_1"}',
        '{"type":"step-started"}',
        '{"type":"text","text":"hello"}',
        '{"type":"tool-started","callId":"call_1","name":"deploy.provision","arguments":{"region":"eu"}}',
        '{"type":"tool-status","callId":"call_1","text":"provisioning"}',
        '{"type":"tool-finished","callId":"call_1","name":"deploy.provision","text":"done","isError":false}',
        '{"type":"elicitation-resolved","elicitationId":"eli_1","outcome":"accepted"}',
        '{"type":"elicitation-resolved","elicitationId":"eli_1","outcome":"accepted","answeredBy":"carol"}',
        '{"type":"run-paused","elicitationIds":["eli_1","eli_2"]}',
        '{"type":"run-finished","reason":"stop"}',
    ]


def test_a_type_this_version_does_not_know_reads_as_none() -> None:
    assert from_json({"type": "tool-progress", "callId": "call_1"}) is None


def test_question_events_have_the_keys_of_their_shapes() -> None:
    sign_in = replace(question(at=AT, url="http://127.0.0.1:8700/auth/connect?t=x"), id="eli_2")
    routed = Approval(People(("carol",)), requester_answers=False)
    assert_shaped(request_event(ASKED), RequestEvent)
    assert_shaped(request_event(sign_in), RequestEvent)
    assert_shaped(pending_event(replace(ASKED, approval=routed)), ApprovalPendingEvent)
    assert_shaped(resolved_event("eli_1", "declined"), ResolvedEvent)
    assert_shaped(resolved_event("eli_1", "accepted", "carol"), ResolvedEvent)


def test_a_form_question_event_keeps_its_keys_in_order() -> None:
    assert list(request_event(ASKED)) == [
        "type",
        "elicitationId",
        "mode",
        "message",
        "context",
        "expiresAt",
        "requestedSchema",
    ]
