"""End to end through the AI SDK UI message stream, read as raw SSE; the answer endpoint's status table."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx

from tests.conftest import HubFactory, RunningHub, sse_data


def ui_body(conversation_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": conversation_id, "messages": [{"id": "m1", "role": "user", "parts": list(parts)}]}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def answer_part(elicitation_id: str, action: str, content: Any = None) -> dict[str, Any]:
    part = {"type": "elicitation-response", "elicitationId": elicitation_id, "action": action}
    if content is not None:
        part["content"] = content
    return part


class UIStream:
    """A UI message stream read part by part on its own connection."""

    def __init__(self, client: httpx.Client, body: dict[str, Any]) -> None:
        self._context = client.stream("POST", "/run/api/chat", json=body)
        self.response = self._context.__enter__()
        self.parts: Iterator[Any] = sse_data(self.response)

    def until(self, kind: str) -> list[dict[str, Any]]:
        seen = []
        for part in self.parts:
            seen.append(part)
            if part["type"] == kind:
                return seen
        raise AssertionError(f"stream ended before a {kind!r} part; saw {[p['type'] for p in seen]}")

    def rest(self) -> list[dict[str, Any]]:
        return list(self.parts)

    def close(self) -> None:
        self._context.__exit__(None, None, None)


def text_of(parts: list[dict[str, Any]]) -> str:
    return "".join(p["delta"] for p in parts if p["type"] == "text-delta")


def ask(hub: RunningHub, conversation_id: str, tool: str = "mrtr.provision") -> tuple[UIStream, dict[str, Any]]:
    stream = UIStream(hub.client(), ui_body(conversation_id, text_part(f'/call {tool} {{"name": "orders"}}')))
    request = stream.until("data-elicitation-request")[-1]
    return stream, request


def test_ui_stream_carries_the_question_as_a_data_part_and_finishes_with_the_result(hub: RunningHub) -> None:
    stream, part = ask(hub, "conv-ui-1")
    assert stream.response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert part["id"] == part["data"]["elicitationId"]
    assert part["data"]["type"] == "elicitation-request"
    assert hub.answer("alice", "conv-ui-1", part["id"], "accept", {"region": "eu-west-1"}).status_code == 200
    rest = stream.rest()
    kinds = [p["type"] for p in rest]
    assert kinds[0] == "data-elicitation-resolved"
    assert "tool-output-available" in kinds
    assert kinds[-1] == "finish"
    assert text_of(rest) == "Provisioned orders in eu-west-1."
    stream.close()


def test_answer_status_table(hub: RunningHub) -> None:
    stream, part = ask(hub, "conv-table")
    eid = part["id"]
    # Unknown id, another user's id, another conversation: all 404.
    assert hub.answer("alice", "conv-table", "eli_nope", "accept", {"region": "eu-west-1"}).status_code == 404
    not_yours = hub.answer("bob", "conv-table", eid, "accept", {"region": "eu-west-1"})
    assert not_yours.status_code == 404
    assert not_yours.json()["error"]["code"] == "not_found"
    assert hub.answer("alice", "other-conv", eid, "accept", {"region": "eu-west-1"}).status_code == 404
    # Bad content: 422 with one error per field, and the question stays pending.
    bad = hub.answer("alice", "conv-table", eid, "accept", {"region": "mars-1", "extra": 1})
    assert bad.status_code == 422
    fields = {f["field"]: f["message"] for f in bad.json()["error"]["fields"]}
    assert set(fields) == {"region", "extra"}
    missing = hub.answer("alice", "conv-table", eid, "accept", {})
    assert missing.status_code == 422
    assert missing.json()["error"]["fields"] == [{"field": "region", "message": "is required"}]
    # A good answer now resolves it; the same answer again is fine; a different one conflicts.
    ok = hub.answer("alice", "conv-table", eid, "accept", {"region": "eu-west-1"})
    assert ok.status_code == 200
    assert ok.json() == {"elicitationId": eid, "outcome": "accepted"}
    assert hub.answer("alice", "conv-table", eid, "accept", {"region": "eu-west-1"}).status_code == 200
    conflict = hub.answer("alice", "conv-table", eid, "decline")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "already_resolved"
    assert text_of(stream.rest()) == "Provisioned orders in eu-west-1."
    stream.close()


def test_malformed_answer_bodies_name_the_field(hub: RunningHub) -> None:
    with hub.client() as client:
        no_action = client.post("/run/api/elicitation-responses", json={"conversationId": "c", "elicitationId": "e"})
        bad_action = client.post(
            "/run/api/elicitation-responses", json={"conversationId": "c", "elicitationId": "e", "action": "maybe"}
        )
        not_json = client.post(
            "/run/api/elicitation-responses", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert no_action.status_code == 422
    assert "action" in no_action.json()["error"]["message"]
    assert bad_action.status_code == 422
    assert "action" in bad_action.json()["error"]["message"]
    assert not_json.status_code == 422
    assert not_json.json()["error"]["code"] == "invalid_request"


def test_fast_path_answer_while_the_original_stream_is_open_continues_there(hub: RunningHub) -> None:
    stream, part = ask(hub, "conv-fast-open")
    with (
        hub.client() as client,
        client.stream(
            "POST",
            "/run/api/chat",
            json=ui_body("conv-fast-open", answer_part(part["id"], "accept", {"region": "us-east-1"})),
        ) as response,
    ):
        assert response.status_code == 200
        short = list(sse_data(response))
    assert [p["type"] for p in short] == ["start", "data-elicitation-resolved", "finish"]
    assert text_of(stream.rest()) == "Provisioned orders in us-east-1."
    stream.close()


def test_fast_path_after_the_client_went_away_streams_the_continuation_on_the_new_request(hub: RunningHub) -> None:
    stream, part = ask(hub, "conv-fast-gone")
    stream.close()  # the browser tab went away while the question was pending
    with hub.client() as client:
        while client.get("/healthz").json()["openStreams"] > 0:
            pass  # the hub notices the disconnect asynchronously
        with client.stream(
            "POST",
            "/run/api/chat",
            json=ui_body("conv-fast-gone", answer_part(part["id"], "accept", {"region": "eu-west-1"})),
        ) as response:
            parts = list(sse_data(response))
    assert text_of(parts) == "Provisioned orders in eu-west-1."
    assert parts[-1]["type"] == "finish"


def test_fast_path_bad_content_is_422_before_any_stream(hub: RunningHub) -> None:
    stream, part = ask(hub, "conv-fast-bad")
    with hub.client() as client:
        response = client.post("/run/api/chat", json=ui_body("conv-fast-bad", answer_part(part["id"], "accept", {})))
        wrong_user = httpx.post(
            f"{hub.url}/run/api/chat",
            json=ui_body("conv-fast-bad", answer_part(part["id"], "decline")),
            headers={"authorization": "Bearer bob-secret-1"},
        )
    assert response.status_code == 422
    assert wrong_user.status_code == 404
    assert hub.answer("alice", "conv-fast-bad", part["id"], "decline").status_code == 200
    stream.close()


def test_openai_fast_path_is_a_user_message_holding_the_answer_json(hub: RunningHub) -> None:
    import json

    stream, part = ask(hub, "conv-openai-fast")
    message = json.dumps(
        {
            "type": "elicitation-response",
            "elicitationId": part["id"],
            "action": "accept",
            "content": {"region": "eu-west-1"},
        }
    )
    with hub.client() as client:
        response = client.post(
            "/run/v1/chat/completions",
            json={"messages": [{"role": "user", "content": message}], "stream": True},
            headers={"x-conversation-id": "conv-openai-fast"},
        )
    assert response.status_code == 200
    assert '"outcome\\": \\"accepted' in response.text
    assert text_of(stream.rest()) == "Provisioned orders in eu-west-1."
    stream.close()


def test_a_new_ordinary_message_cancels_the_pending_question(hub: RunningHub) -> None:
    stream, part = ask(hub, "conv-mind")
    old_rest: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: old_rest.extend(stream.rest()))
    reader.start()
    with (
        hub.client() as client,
        client.stream(
            "POST", "/run/api/chat", json=ui_body("conv-mind", text_part('/call legacy.echo {"text": "instead"}'))
        ) as response,
    ):
        new_parts = list(sse_data(response))
    reader.join(timeout=20)
    resolved = next(p for p in old_rest if p["type"] == "data-elicitation-resolved")
    assert resolved["data"]["outcome"] == "cancelled"
    [failed] = [p for p in old_rest if p["type"] == "tool-output-error"]  # the tool gets a cancellation
    assert failed["errorText"] == "The run was stopped; the call to mrtr.provision was cancelled."
    assert old_rest[-1]["type"] == "finish"
    assert text_of(new_parts) == "echo: instead"
    assert hub.answer("alice", "conv-mind", part["id"], "accept", {"region": "eu-west-1"}).status_code == 409
    stream.close()


def test_a_run_superseded_by_a_new_message_does_not_call_the_downstream_tool_again(hub: RunningHub) -> None:
    provision = text_part('/call mrtr.provision {"name": "superseded"}')
    stream = UIStream(hub.client(), ui_body("conv-moved-on", provision))
    stream.until("data-elicitation-request")
    with hub.client() as client:
        client.post("/run/api/chat", json=ui_body("conv-moved-on", text_part("never mind"))).read()
    old_rest = stream.rest()  # the old run's stream ends with the run
    stream.close()
    assert old_rest[-1]["type"] == "finish"
    assert hub.downstream_calls("provision", "superseded") == 1  # the round that asked; no retry with the cancel
    [resolved] = [p for p in old_rest if p["type"] == "data-elicitation-resolved"]
    assert resolved["data"]["outcome"] == "cancelled"


def test_idle_stream_carries_keep_alive_comments(make_hub: HubFactory) -> None:
    hub = make_hub(streams={"keepalive_s": 0.2})
    with (
        hub.client() as client,
        client.stream(
            "POST", "/run/api/chat", json=ui_body("conv-ka", text_part('/call mrtr.provision {"name": "x"}'))
        ) as response,
    ):
        lines = response.iter_lines()
        eid = None
        for line in lines:
            if '"data-elicitation-request"' in line:
                eid = line.split('"id":"')[1].split('"')[0]
            if line.startswith(": keep-alive") and eid is not None:
                break
        assert eid is not None
        assert hub.answer("alice", "conv-ka", eid, "decline").status_code == 200
        rest = list(lines)
    assert any(line == "data: [DONE]" for line in rest)


def test_conversations_belong_to_their_user(hub: RunningHub) -> None:
    with hub.client("alice") as alice:
        alice.post("/run/api/chat", json=ui_body("conv-private", text_part("hello alice"))).read()
    with hub.client("bob") as bob:
        # The same id is Bob's own conversation: he neither sees Alice's nor locks her out of hers.
        assert bob.get("/run/api/conversations/conv-private").status_code == 404
        assert bob.post("/run/api/chat", json=ui_body("conv-private", text_part("hello bob"))).status_code == 200
        assert bob.get("/run/api/conversations/conv-private").json()["messages"][0]["text"] == "hello bob"
    with hub.client("alice") as alice:
        assert alice.get("/run/api/conversations/conv-private").json()["messages"][0]["text"] == "hello alice"


def test_bad_bearer_token_is_401_and_errors_are_json(hub: RunningHub) -> None:
    response = httpx.post(
        f"{hub.url}/run/api/chat", json=ui_body("c", text_part("hi")), headers={"authorization": "Bearer wrong-token"}
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert httpx.get(f"{hub.url}/nope").json()["error"]["code"] == "not_found"


def test_health_and_openapi(hub: RunningHub) -> None:
    assert httpx.get(f"{hub.url}/healthz").json()["status"] == "ok"
    paths = httpx.get(f"{hub.url}/openapi.json").json()["paths"]
    assert {"/run/v1/chat/completions", "/run/api/chat", "/run/api/elicitation-responses"} <= set(paths)
