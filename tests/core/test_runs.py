"""Run records, conversation keys and the run status rule, as plain values."""

from __future__ import annotations

import pytest

from elicithub.core.runs import (
    CHILD_RUN,
    ConversationRecord,
    Pause,
    RunRecord,
    RunTransitionError,
    ToolCall,
    ToolCallJson,
    conversation_key,
    next_status,
)
from tests.shapes import assert_shaped


def test_a_run_pauses_continues_and_finishes_once() -> None:
    assert next_status("running", "pause") == "paused"
    assert next_status("paused", "pause") == "paused"  # the next round of the same call
    assert next_status("paused", "continue") == "running"
    assert next_status("running", "finish") == "finished"
    assert next_status("paused", "finish") == "finished"
    for change in ("pause", "continue", "finish"):
        with pytest.raises(RunTransitionError):
            next_status("finished", change)  # type: ignore[arg-type]


def test_records_survive_their_json_form() -> None:
    run = RunRecord(
        "run_1",
        "chat-1",
        "alice",
        True,
        [{"role": "user", "content": "hi"}],
        parent_run_id="run_0",
        pause=Pause("mcp", {"region": "eli_1"}, {"kind": "mrtr", "request_state": "s", "rounds": 2}),
        status="paused",
    )
    assert RunRecord.from_json(run.to_json()) == run
    conversation = ConversationRecord("u:alice/chat-1", "chat-1", "alice", active_run_id="run_1", version=3)
    assert ConversationRecord.from_json(conversation.to_json()) == conversation


def test_a_stored_tool_call_has_the_keys_of_its_shape() -> None:
    made = ToolCall("call_1", "mrtr.provision", {"name": "orders"})
    unreadable = ToolCall("call_2", "mrtr.provision", {}, error="The arguments are not JSON.")
    assert list(made.to_json()) == ["id", "name", "arguments"]
    assert list(unreadable.to_json()) == ["id", "name", "arguments", "error"]
    for call in (made, unreadable):
        assert_shaped(call.to_json(), ToolCallJson)
        assert ToolCall.from_json(call.to_json()) == call


def test_a_run_keeps_its_tool_calls_in_the_stored_shape_of_earlier_versions() -> None:
    call = {"id": "call_1", "name": "mrtr.provision", "arguments": {"name": "orders"}}
    stored = {**RunRecord("run_1", "chat-1", "alice", True, []).to_json(), "tool_calls": [call]}
    run = RunRecord.from_json(stored)
    assert run.tool_calls == [ToolCall("call_1", "mrtr.provision", {"name": "orders"})]
    assert run.to_json()["tool_calls"] == [call]


def test_a_call_whose_arguments_could_not_be_read_keeps_its_error_in_its_json_form() -> None:
    refused = ToolCall("call_1", "mrtr.provision", {}, error="The arguments for mrtr.provision are not valid JSON.")
    run = RunRecord("run_1", "chat-1", "alice", True, [], tool_calls=[refused])
    assert RunRecord.from_json(run.to_json()).tool_calls == [refused]  # resumed, it is still not made


def test_conversation_keys_are_scoped_to_users_and_cannot_collide() -> None:
    assert conversation_key("alice", "chat-1") != conversation_key("bob", "chat-1")
    assert conversation_key(None, "chat-1") != conversation_key("~", "chat-1")
    assert conversation_key("a/b", "c") != conversation_key("a", "b/c")


def test_a_pause_names_the_delegated_run_it_waits_on_and_survives_json() -> None:
    delegating = Pause("delegate", {}, {CHILD_RUN: "run_child"})
    assert delegating.child_run_id == "run_child"
    record = RunRecord("run_1", "c", "alice", True, [], pause=delegating)
    assert RunRecord.from_json(record.to_json()).pause == delegating
    assert Pause("mcp", {"region": "eli_1"}).child_run_id is None
    assert Pause("delegate", {}, {CHILD_RUN: 7}).child_run_id is None  # not a run id: nothing to follow
