"""Reading a `Last-Event-ID` back: ours is `RUN:SEQ`; anything else, of any length, reads the run from its start."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest

from elicithub.surfaces.streaming import OpenStreams, SSEResponse, parse_event_id
from tests.conftest import RunningHub, sse_data
from tests.core_fixtures import until
from tests.server.test_chat_ui_stream import UIStream, text_part, ui_body


def test_an_event_id_of_ours_is_its_run_and_position() -> None:
    assert parse_event_id("run_abc:12") == ("run_abc", 12, (0, 0))
    assert parse_event_id("run:with:colons:7") == ("run:with:colons", 7, (0, 0))
    assert parse_event_id("run_abc:" + "9" * 18) == ("run_abc", 10**18 - 1, (0, 0))
    # Inside a model turn that streamed: how much of its text and thinking the reader had.
    assert parse_event_id("run_abc:12:40.3") == ("run_abc", 12, (40, 3))
    assert parse_event_id("run_abc:12:40.x") is None
    assert parse_event_id("run_abc:12:" + "9" * 19 + ".0") is None


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "run_abc",
        ":12",
        "run_abc:",
        "run_abc:-1",
        "run_abc:1e3",
        "run_abc:²",
        "run_abc:١٢",
        "run_abc:" + "9" * 19,
    ],
)
def test_anything_else_is_not_ours(value: str | None) -> None:
    assert parse_event_id(value) is None


def test_an_event_id_of_any_length_is_read_without_a_server_error(hub: RunningHub) -> None:
    stream = UIStream(hub.client(), ui_body("conv-long-id", text_part('/call mrtr.provision {"name": "orders"}')))
    asked = stream.until("data-elicitation-request")
    run_id = asked[0]["messageId"]
    with hub.client() as client:
        with client.stream("POST", "/run/api/chat", json=ui_body("conv-idle", text_part("hello"))) as done:
            list(sse_data(done))
        idle = client.get("/run/api/conversations/conv-idle/stream", headers={"last-event-id": "s:" + "1" * 5000})
        assert idle.status_code == 204
        too_far = {"last-event-id": f"{run_id}:" + "9" * 5000}
        with client.stream("GET", "/run/api/conversations/conv-long-id/stream", headers=too_far) as replay:
            assert replay.status_code == 200
            parts = sse_data(replay)
            assert next(parts) == {"type": "start", "messageId": run_id}  # read from the start
            assert any(p["type"] == "data-elicitation-request" for p in parts)
    assert hub.answer("alice", "conv-long-id", asked[-1]["id"], "decline").status_code == 200
    stream.close()


@pytest.mark.anyio
async def test_a_shutdown_ends_open_streams_with_a_clean_end_of_body_before_their_runs_end() -> None:
    streams = OpenStreams()
    closed = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def frames() -> AsyncGenerator[tuple[bytes, bool], None]:
        try:
            yield b"data: first\r\n\r\n", False
            await asyncio.Event().wait()  # an idle run: nothing more comes
            yield b"never", True
        finally:
            closed.set()

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    response = SSEResponse(frames(), keepalive_s=3600, headers={}, streams=streams)
    serving = asyncio.create_task(response({"type": "http"}, receive, send))
    await until(lambda: len(sent) == 2 and len(streams) == 1)  # its headers and first frame are out

    streams.end_all()
    with anyio.fail_after(10):
        await serving  # ends without raising: the stream was let go, not the server's task cancelled
    assert closed.is_set() and len(streams) == 0
    # The body ends properly, with no frame of the run's end: its reader reattaches (`Last-Event-ID`).
    assert [(m.get("body"), m.get("more_body")) for m in sent] == [
        (None, None),
        (b"data: first\r\n\r\n", True),
        (b"", False),
    ]


@pytest.mark.anyio
async def test_a_stream_that_ended_is_not_ended_again() -> None:
    streams = OpenStreams()
    sent: list[dict[str, Any]] = []

    async def frames() -> AsyncGenerator[tuple[bytes, bool], None]:
        yield b"data: only\r\n\r\n", False  # the run's stream ended before the run: the response ends on its own

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    response = SSEResponse(frames(), keepalive_s=3600, headers={}, streams=streams)
    await response({"type": "http"}, receive, send)
    streams.end_all()  # nothing open: nothing to end
    assert len(streams) == 0 and sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


@pytest.mark.anyio
async def test_the_last_frame_ends_the_response_in_the_same_message() -> None:
    """A run's last frame and the end of the body go in one write, not a frame and then an empty end."""
    sent: list[dict[str, Any]] = []

    async def frames() -> AsyncGenerator[tuple[bytes, bool], None]:
        yield b"data: first\r\n\r\n", False
        yield b"data: [DONE]\r\n\r\n", True

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    streams = OpenStreams()
    await SSEResponse(frames(), keepalive_s=3600, headers={}, streams=streams)({"type": "http"}, receive, send)
    assert [(m["type"], m.get("body"), m.get("more_body")) for m in sent] == [
        ("http.response.start", None, None),
        ("http.response.body", b"data: first\r\n\r\n", True),
        ("http.response.body", b"data: [DONE]\r\n\r\n", False),
    ]
    assert len(streams) == 0
