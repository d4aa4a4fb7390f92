"""The run service through HTTP: ids checked before anything runs, scoped conversations, one run at a time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import HubFactory, RunningHub, sse_data
from tests.server.test_chat_ui_stream import ask, text_of, text_part, ui_body


def pending_count(hub: RunningHub) -> int:
    with hub.client() as client:
        return int(client.get("/healthz").json()["pendingElicitations"])


def test_bad_conversation_ids_are_400_and_leave_no_question(hub: RunningHub) -> None:
    call = text_part('/call mrtr.provision {"name": "x"}')
    with hub.client() as client:
        for bad in ["emoji-\U0001f600", "cr\r\nlf", "x" * 200, "a b", "a:b"]:
            response = client.post("/run/api/chat", json=ui_body(bad, call))
            assert response.status_code == 400, (bad, response.text)
            assert response.json()["error"]["code"] == "bad_request"
            assert "conversation id" in response.json()["error"]["message"]
        header = client.post(
            "/run/v1/chat/completions",
            headers={"x-conversation-id": "emoji-\u00e9".encode()},
            json={"stream": True, "messages": [{"role": "user", "content": '/call mrtr.provision {"name": "x"}'}]},
        )
        assert header.status_code == 400
        assert client.get("/run/api/conversations/a%20b/stream").status_code == 400
    assert pending_count(hub) == 0


def test_the_same_conversation_id_is_two_conversations_for_two_users(hub: RunningHub) -> None:
    for user, text in (("bob", "hello from bob"), ("alice", "hello from alice")):
        with (
            hub.client(user) as client,
            client.stream("POST", "/run/api/chat", json=ui_body("chat-1", text_part(text))) as r,
        ):
            assert r.status_code == 200
            list(sse_data(r))
    for user, text in (("alice", "hello from alice"), ("bob", "hello from bob")):
        with hub.client(user) as client:
            messages = client.get("/run/api/conversations/chat-1").json()["messages"]
        assert messages[0] == {"role": "user", "text": text}


def test_anonymous_conversations_get_unguessable_ids_only_their_holder_continues(hub: RunningHub) -> None:
    with hub.client(None) as anonymous:
        with anonymous.stream("POST", "/run/api/chat", json=ui_body("mine", text_part("hi"))) as r:
            issued = r.headers["x-conversation-id"]
            list(sse_data(r))
        assert issued != "mine" and len(issued) > 20
        with anonymous.stream("POST", "/run/api/chat", json=ui_body(issued, text_part("again"))) as r:
            assert r.headers["x-conversation-id"] == issued
            list(sse_data(r))
        # Another anonymous caller who picks a name gets a conversation of their own, never someone else's.
        with anonymous.stream("POST", "/run/api/chat", json=ui_body("mine", text_part("hi"))) as r:
            assert r.headers["x-conversation-id"] not in ("mine", issued)
            list(sse_data(r))
    with hub.client() as alice:
        assert alice.get(f"/run/api/conversations/{issued}").status_code == 404


def test_a_double_click_does_not_wait_and_cancels_the_first_question(hub: RunningHub) -> None:
    stream, request = ask(hub, "conv-double")
    old: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: old.extend(stream.rest()))
    reader.start()
    started = time.monotonic()
    with (
        hub.client() as client,
        client.stream(
            "POST", "/run/api/chat", json=ui_body("conv-double", text_part('/call mrtr.provision {"name": "twice"}'))
        ) as second,
    ):
        assert second.status_code == 200
        parts = sse_data(second)
        again = next(p for p in parts if p["type"] == "data-elicitation-request")
        assert time.monotonic() - started < 10  # it did not wait for the first question to end
        assert again["id"] != request["id"]
        reader.join(timeout=20)
        assert hub.answer("alice", "conv-double", again["id"], "accept", {"region": "eu-west-1"}).status_code == 200
        assert text_of(list(parts)) == "Provisioned twice in eu-west-1."
    cancelled = [p["data"]["outcome"] for p in old if p["type"] == "data-elicitation-resolved"]
    assert cancelled == ["cancelled"]
    stream.close()


def test_a_lone_surrogate_in_answer_content_is_422_not_500(hub: RunningHub) -> None:
    stream, request = ask(hub, "conv-surrogate")
    body = '{"conversationId": "conv-surrogate", "elicitationId": "%s", "action": "accept", "content": {"\\ud800": 1}}'
    with hub.client() as client:
        response = client.post(
            "/run/api/elicitation-responses",
            content=(body % request["id"]).encode(),
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 422
    json.loads(response.text)  # a body a client can parse
    assert hub.answer("alice", "conv-surrogate", request["id"], "decline").status_code == 200
    stream.close()


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "12.5E+400"]


@pytest.mark.parametrize("literal", NON_FINITE)
def test_non_finite_numbers_in_call_arguments_never_reach_a_stream(hub: RunningHub, literal: str) -> None:
    message = f'/call legacy.echo {{"text": {literal}}}'
    with (
        hub.client() as client,
        client.stream("POST", "/run/api/chat", json=ui_body("conv-nan", text_part(message))) as response,
    ):
        raw = [line for line in response.iter_lines() if line.startswith("data: ")]

    def refuse(token: str) -> Any:
        raise AssertionError(f"a bare {token} on the stream")

    payloads = [line.removeprefix("data: ") for line in raw]
    assert payloads[-1] == "[DONE]"  # the stream ends as streams end
    parts = [json.loads(p, parse_constant=refuse) for p in payloads if p != "[DONE]"]
    assert "non-finite" in text_of(parts) and parts[-1]["type"] == "finish"


@pytest.mark.parametrize("literal", NON_FINITE)
def test_answers_holding_a_non_finite_number_are_422_on_every_path(hub: RunningHub, literal: str) -> None:
    stream, request = ask(hub, "conv-inf-answer")
    answer = (
        f'{{"type": "elicitation-response", "elicitationId": "{request["id"]}", '
        f'"action": "accept", "content": {{"region": {literal}}}}}'
    )
    ui = f'{{"id": "conv-inf-answer", "messages": [{{"role": "user", "parts": [{answer}]}}]}}'
    openai = {"messages": [{"role": "user", "content": answer}], "stream": True}
    with hub.client() as client:
        raw = {"content-type": "application/json"}
        responses = [
            client.post(
                "/run/api/elicitation-responses",
                content=answer.replace('"type": "elicitation-response"', '"conversationId": "conv-inf-answer"'),
                headers=raw,
            ),
            client.post("/run/api/chat", content=ui, headers=raw),
            client.post("/run/v1/chat/completions", json=openai, headers={"x-conversation-id": "conv-inf-answer"}),
        ]
    for response in responses:
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "invalid_request"
    assert pending_count(hub) == 1  # nothing was taken: the question still waits
    assert hub.answer("alice", "conv-inf-answer", request["id"], "accept", {"region": "eu-west-1"}).status_code == 200
    assert text_of(stream.rest()) == "Provisioned orders in eu-west-1."
    stream.close()


def test_a_number_json_cannot_carry_anywhere_in_a_chat_body_is_422(hub: RunningHub) -> None:
    body = (
        '{"id": "conv-inf-body", "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}], "x": 1e999}'
    )
    with hub.client() as client:
        response = client.post("/run/api/chat", content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422
        assert response.json()["error"]["message"] == "body: 1e999 overflows to infinity, which JSON cannot carry."
        assert client.get("/run/api/conversations/conv-inf-body").status_code == 404  # nothing ran


def test_no_conversation_lives_in_the_process_once_its_run_is_over(hub: RunningHub) -> None:
    with httpx.Client(base_url=hub.url, headers={"authorization": "Bearer alice-secret"}, timeout=30) as client:
        for i in range(20):
            with client.stream("POST", "/run/api/chat", json=ui_body(f"conv-mem-{i}", text_part("hi"))) as r:
                list(sse_data(r))
        health = client.get("/healthz").json()
    assert health["runs"] == 0 and health["openStreams"] == 0 and health["reattachedStreams"] == 0


def test_bodies_over_the_limit_are_413_declared_or_streamed(make_hub: HubFactory) -> None:
    hub = make_hub(limits={"max_body_bytes": 10_000})
    big = json.dumps(ui_body("conv-big", text_part("x" * 20_000))).encode()

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must count what streams in
        for start in range(0, len(big), 4096):
            yield big[start : start + 4096]

    with hub.client() as client:
        declared = client.post("/run/api/chat", content=big, headers={"content-type": "application/json"})
        streamed = client.post("/run/api/chat", content=chunks(), headers={"content-type": "application/json"})
        small = client.post("/run/api/chat", json=ui_body("conv-small", text_part("hi")))
    for response in (declared, streamed):
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"
    assert small.status_code == 200
