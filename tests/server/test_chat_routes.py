"""The chat and answer endpoints served ahead of FastAPI: bad bodies refused as before, streams that let go of
their run when the client leaves, keep-alives while idle."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import HubFactory, RunningHub, eventually, sse_data
from tests.server.test_chat_ui_stream import UIStream, ask, text_part, ui_body

PATHS = ["/run/api/chat", "/run/v1/chat/completions", "/run/api/elicitation-responses"]
JSON = {"content-type": "application/json"}


def open_streams(hub: RunningHub) -> int:
    with hub.client() as client:
        return int(client.get("/healthz").json()["openStreams"])


@pytest.mark.parametrize("path", PATHS)
def test_bodies_that_are_not_json_objects_are_422_naming_the_problem(hub: RunningHub, path: str) -> None:
    cases = [
        (b"{not json", JSON, "1: JSON decode error"),
        (b"", JSON, "body: Field required"),
        (b'{"a": 1}', {"content-type": "text/plain"}, "body: Input should be a valid dictionary"),
        (b'{"a": 1}', {}, "body: Input should be a valid dictionary"),
        (b"[1]", JSON, "body: Input should be a valid dictionary"),
        (b'{"a": 1e999}', JSON, "body: 1e999 overflows to infinity, which JSON cannot carry."),
    ]
    with hub.client() as client:
        for content, headers, message in cases:
            response = client.post(path, content=content, headers=headers)
            assert response.status_code == 422, (content, response.text)
            error = response.json()["error"]
            assert error["code"] == "invalid_request" and error["message"].startswith(message), (content, error)
        not_utf8 = client.post(path, content=b'{"a": "\xff"}', headers=JSON)
        assert not_utf8.status_code == 400 and not_utf8.json()["error"]["code"] == "bad_request"
        other_method = client.get(path)
        assert other_method.status_code == 405 and other_method.headers["allow"] == "POST"


@pytest.mark.parametrize("path", PATHS)
def test_bodies_over_the_limit_are_413_on_every_wire_route(make_hub: HubFactory, path: str) -> None:
    hub = make_hub(limits={"max_body_bytes": 1000})
    big = json.dumps({"id": "c", "stream": True, "messages": [{"role": "user", "content": "x" * 2000}]}).encode()

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts what streams in
        for start in range(0, len(big), 256):
            yield big[start : start + 256]

    with hub.client() as client:
        for response in (client.post(path, content=big, headers=JSON), client.post(path, content=chunks())):
            assert response.status_code == 413
            assert response.json()["error"]["code"] == "payload_too_large"


def test_a_client_that_goes_away_mid_stream_lets_go_of_the_run(hub: RunningHub) -> None:
    stream, request = ask(hub, "conv-gone")
    assert open_streams(hub) == 1
    stream.close()  # while the run waits on its question: nothing is being written
    eventually(lambda: open_streams(hub) == 0, "the reader was released")
    with hub.client() as client:
        answer = {"type": "elicitation-response", "elicitationId": request["id"], "action": "decline"}
        with client.stream("POST", "/run/api/chat", json=ui_body("conv-gone", answer)) as response:
            parts = list(sse_data(response))
    # Nobody follows the run any more, so its continuation streams on the answer's own request.
    assert parts[-1]["type"] == "finish"
    assert any(p["type"] == "data-elicitation-resolved" for p in parts)


def test_an_idle_stream_carries_keep_alives_until_its_run_goes_on(make_hub: HubFactory) -> None:
    hub = make_hub(streams={"keepalive_s": 0.05})
    with hub.client() as client:
        call = text_part('/call mrtr.provision {"name": "orders"}')
        with client.stream("POST", "/run/api/chat", json=ui_body("conv-idle", call)) as response:
            lines = response.iter_lines()
            question = next(line for line in lines if "data-elicitation-request" in line)
            keepalives = 0
            for line in lines:
                assert line in (": keep-alive", ""), line  # nothing else while the run waits
                keepalives += line == ": keep-alive"
                if keepalives == 2:
                    break
            eid = json.loads(question.removeprefix("data: "))["id"]
            assert hub.answer("alice", "conv-idle", eid, "decline").status_code == 200
            rest = [line for line in lines if line.startswith("data: ")]
    assert rest[-1] == "data: [DONE]"
    assert json.loads(rest[0].removeprefix("data: "))["type"] == "data-elicitation-resolved"


def test_a_stream_client_sees_the_headers_before_any_event(hub: RunningHub) -> None:
    with (
        httpx.Client(base_url=hub.url, headers={"authorization": "Bearer alice-secret"}, timeout=30) as client,
        client.stream("POST", "/run/api/chat", json=ui_body("conv-heads", text_part("hi"))) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["x-conversation-id"] == "conv-heads"
        assert list(sse_data(response))[-1]["type"] == "finish"


def test_an_answer_repeated_after_its_run_finished_streams_that_continuation_again_and_ends(
    make_hub: HubFactory,
) -> None:
    # Keep-alives far apart: a stream that waits on nothing ends in the client's read timeout, not in comments.
    hub = make_hub(streams={"keepalive_s": 600})
    stream = UIStream(hub.client(), ui_body("conv-again", text_part('/call mrtr.provision {"name": "again"}')))
    request = stream.until("data-elicitation-request")[-1]
    stream.close()
    answer = {
        "type": "elicitation-response",
        "elicitationId": request["id"],
        "action": "accept",
        "content": {"region": "eu-west-1"},
    }
    with hub.client() as client:
        replies = []
        for _ in range(2):  # the second comes once the run has finished (the first stream read to its end)
            with client.stream("POST", "/run/api/chat", json=ui_body("conv-again", answer)) as response:
                assert response.status_code == 200
                replies.append(list(sse_data(response)))
    first, again = replies
    assert first[-1]["type"] == again[-1]["type"] == "finish"
    for reply in (first, again):
        assert "Provisioned again in eu-west-1." in json.dumps(reply)
    assert hub.downstream_calls("provision", "again") == 2  # the round that asked and its retry: none more
