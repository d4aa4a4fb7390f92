"""The stream writers on plain events: what each surface puts on the wire, with no server."""

from __future__ import annotations

import json
from datetime import timedelta

from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    RunFinished,
    RunPaused,
    RunStarted,
    StepStarted,
    TextDelta,
    ToolCallFinished,
)
from elicithub.core.runs import ToolCall
from elicithub.surfaces.chat.openai_sse import OpenAIChunkWriter
from elicithub.surfaces.chat.ui_stream import UIMessageStreamWriter
from tests.core_fixtures import SCHEMA, question

QUESTION = question(run_id="run_1")


def parts(lines: list[str]) -> list[dict]:
    return [json.loads(line) for line in lines if line != "[DONE]"]


def test_ui_writer_names_the_message_and_frames_a_whole_run() -> None:
    writer = UIMessageStreamWriter("run_1")
    lines = writer.start()
    for event in [
        RunStarted("run_1"),
        StepStarted(),
        ToolCall("call_1", "mrtr.provision", {"name": "orders"}),
        ElicitationRequested(QUESTION),
        RunPaused((QUESTION.id,)),
        ElicitationResolved(QUESTION.id, "accepted"),
        ToolCallFinished("call_1", "mrtr.provision", "done", False),
        StepStarted(),
        TextDelta("done"),
        RunFinished(),
    ]:
        lines += writer.write(event)
    types = [p["type"] for p in parts(lines)]
    assert parts(lines)[0] == {"type": "start", "messageId": "run_1"}
    assert types == [
        "start",
        "start-step",
        "tool-input-available",
        "data-elicitation-request",
        "data-elicitation-resolved",
        "tool-output-available",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    tools = [p for p in parts(lines) if p["type"].startswith("tool-")]
    assert all(p["dynamic"] is True for p in tools)  # MCP tools are dynamic tools to the AI SDK
    assert lines[-1] == "[DONE]"
    request = next(p for p in parts(lines) if p["type"] == "data-elicitation-request")
    assert request["id"] == QUESTION.id and request["data"]["requestedSchema"] == SCHEMA


def test_ui_writer_without_a_name_makes_one_and_ends_a_cut_stream_cleanly() -> None:
    writer = UIMessageStreamWriter()
    assert writer.message_id.startswith("msg_")
    lines = writer.start() + writer.write(TextDelta("half")) + writer.end()
    types = [p["type"] for p in parts(lines)]
    assert types == ["start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]
    assert lines[-1] == "[DONE]"


def test_openai_writer_carries_events_as_json_content_and_stops() -> None:
    writer = OpenAIChunkWriter("scripted")
    lines = writer.start() + writer.write(ElicitationRequested(QUESTION)) + writer.write(RunPaused((QUESTION.id,)))
    lines += writer.write(RunFinished())
    chunks = parts(lines)
    event = json.loads(chunks[1]["choices"][0]["delta"]["content"])
    assert event["type"] == "elicitation-request" and event["elicitationId"] == QUESTION.id
    assert len(chunks) == 3 and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert lines[-1] == "[DONE]"
    assert QUESTION.expires_at - QUESTION.created_at == timedelta(seconds=60)


def test_a_frame_that_depends_on_the_event_alone_is_encoded_once_for_every_reader() -> None:
    """Every reader on the hub that wrote an event gets the one event object: its shared frames are made once."""
    asked = ElicitationRequested(QUESTION)
    resolved = ElicitationResolved(QUESTION.id, "accepted")
    done = ToolCallFinished("call_1", "mrtr.provision", "done", False)
    first, second = UIMessageStreamWriter("run_1"), UIMessageStreamWriter("run_1")
    for event in [asked, resolved, done]:
        a, b = first.write(event)[-1], second.write(event)[-1]
        assert a is b  # the same string, not an equal one encoded again
    chats = [OpenAIChunkWriter("scripted"), OpenAIChunkWriter("scripted")]
    contents = [json.loads(w.write(asked)[0])["choices"][0]["delta"]["content"] for w in chats]
    assert contents[0] == contents[1] and set(asked.frames) == {"ui", "openai"}
    # Frames that carry a reader's own state are not shared: each OpenAI stream names its own chunks.
    assert json.loads(chats[0].write(asked)[0])["id"] != json.loads(chats[1].write(asked)[0])["id"]


def test_a_shared_frame_is_the_frame_the_event_would_have_had_on_its_own() -> None:
    """Sharing never changes the bytes: a copy of the event (no frames yet) is framed the same."""
    asked = ElicitationRequested(QUESTION)
    UIMessageStreamWriter("run_1").write(asked)
    again = ElicitationRequested(QUESTION)
    assert UIMessageStreamWriter("run_1").write(asked) == UIMessageStreamWriter("run_1").write(again)
    assert asked == again  # the frames kept on an event are no part of what it is
