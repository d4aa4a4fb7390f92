"""End to end through the OpenAI-compatible surface, read with the real `openai` client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from openai import OpenAI, Stream
from openai.types.chat import ChatCompletionChunk

from tests.conftest import HubFactory, McpProcess, RunningHub


def chat(
    hub: RunningHub, text: str, *, user: str = "alice", elicitation: bool = True, **kw: Any
) -> Stream[ChatCompletionChunk]:
    token = {"alice": "alice-secret", "bob": "bob-secret-1"}[user]
    headers = {"x-supports-elicitation": "true"} if elicitation else {}
    client = OpenAI(base_url=f"{hub.url}/run/v1", api_key=token, default_headers=headers, max_retries=0)
    return client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": text}], stream=True, **kw
    )


def items(stream: Stream[ChatCompletionChunk]) -> Iterator[str | dict[str, Any]]:
    """Text pieces as strings, elicitation events as dicts."""
    for chunk in stream:
        content = chunk.choices[0].delta.content if chunk.choices else None
        if not content:
            continue
        if content.startswith('{"type": "elicitation-'):
            yield json.loads(content)
        else:
            yield content


def conversation(stream: Stream[ChatCompletionChunk]) -> str:
    return stream.response.headers["x-conversation-id"]


def run_answering(hub: RunningHub, text: str, answers: list[tuple[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Chat, answer each elicitation-request in order with (action, content); return the text and all events."""
    stream = chat(hub, text)
    texts, events = [], []
    pending = list(answers)
    for item in items(stream):
        if isinstance(item, str):
            texts.append(item)
            continue
        events.append(item)
        if item["type"] == "elicitation-request":
            action, content = pending.pop(0)
            response = hub.answer("alice", conversation(stream), item["elicitationId"], action, content)
            assert response.status_code == 200, response.text
    return "".join(texts), events


def test_legacy_form_question_answered_returns_the_tool_result(hub: RunningHub) -> None:
    text, events = run_answering(
        hub, '/call legacy.provision {"name": "orders"}', [("accept", {"region": "eu-west-1"})]
    )
    request = events[0]
    assert request["mode"] == "form"
    assert request["message"] == "Which region should orders live in?"
    assert request["context"] == {"trigger": "mcp_elicitation", "serverId": "legacy", "toolName": "provision"}
    assert request["requestedSchema"]["properties"]["region"]["enum"] == ["us-east-1", "eu-west-1"]
    assert request["expiresAt"].endswith("Z")
    assert events[1] == {
        "type": "elicitation-resolved",
        "elicitationId": request["elicitationId"],
        "outcome": "accepted",
    }
    assert text == "Provisioned orders in eu-west-1."


def test_mrtr_form_question_answered_returns_the_tool_result(hub: RunningHub) -> None:
    text, events = run_answering(hub, '/call mrtr.provision {"name": "orders"}', [("accept", {"region": "us-east-1"})])
    assert events[0]["requestedSchema"]["properties"]["region"]["oneOf"][0] == {
        "const": "us-east-1",
        "title": "US East",
    }
    assert events[0]["context"]["serverId"] == "mrtr"
    assert text == "Provisioned orders in us-east-1."


def test_two_questions_in_one_mrtr_round_are_asked_together(hub: RunningHub) -> None:
    stream = chat(hub, '/call mrtr.deploy {"name": "web"}')
    requests: list[dict[str, Any]] = []
    texts = []
    for item in items(stream):
        if isinstance(item, str):
            texts.append(item)
        elif item["type"] == "elicitation-request":
            requests.append(item)
            if len(requests) == 2:
                # Both are on the stream before either is answered.
                by_message = {r["message"]: r["elicitationId"] for r in requests}
                conv = conversation(stream)
                assert (
                    hub.answer("alice", conv, by_message["Deploy web?"], "accept", {"confirm": True}).status_code == 200
                )
                assert (
                    hub.answer(
                        "alice", conv, by_message["Which region?"], "accept", {"region": "eu-west-1"}
                    ).status_code
                    == 200
                )
    assert len(requests) == 2
    assert "".join(texts) == "Deployed web to eu-west-1."


def test_decline_gives_a_descriptive_tool_error(hub: RunningHub) -> None:
    text, events = run_answering(hub, '/call mrtr.provision {"name": "orders"}', [("decline", None)])
    assert events[1]["outcome"] == "declined"
    assert text == "Tool error: Provisioning of orders stopped: the user chose decline."


def test_cancel_in_the_legacy_era_gives_a_descriptive_tool_error(hub: RunningHub) -> None:
    text, events = run_answering(hub, '/call legacy.provision {"name": "orders"}', [("cancel", None)])
    assert events[1]["outcome"] == "cancelled"
    assert text.startswith("Tool error: ")
    assert "Provisioning of orders stopped: the user chose cancel." in text


def test_unanswered_question_expires_with_a_resolved_event_and_tool_error(make_hub: HubFactory) -> None:
    hub = make_hub(elicitation={"timeout_s": 0.5})
    stream = chat(hub, '/call mrtr.provision {"name": "orders"}')
    collected = list(items(stream))
    request, resolved = collected[0], collected[1]
    assert isinstance(request, dict) and isinstance(resolved, dict)
    assert resolved == {"type": "elicitation-resolved", "elicitationId": request["elicitationId"], "outcome": "expired"}
    text = "".join(i for i in collected if isinstance(i, str))
    assert text.startswith("Tool error: The user did not answer 'Which region should orders live in?' within 0.5 s")
    late = hub.answer("alice", conversation(stream), request["elicitationId"], "accept", {"region": "us-east-1"})
    assert late.status_code == 410


def test_round_cap_stops_a_server_that_never_finishes(make_hub: HubFactory) -> None:
    hub = make_hub(elicitation={"max_rounds": 3})
    text = "".join(i for i in items(chat(hub, "/call mrtr.forever {}")) if isinstance(i, str))
    assert text == "Tool error: Tool mrtr.forever kept asking for input for more than 3 rounds; the call was stopped."


def test_a_round_with_only_request_state_is_retried(hub: RunningHub) -> None:
    text = "".join(i for i in items(chat(hub, "/call mrtr.later {}")) if isinstance(i, str))
    assert text == "Done after waiting."


def test_without_the_header_no_event_is_sent_and_the_tool_fails_at_once(hub: RunningHub) -> None:
    for tool in ("mrtr.provision", "legacy.provision"):
        collected = list(items(chat(hub, f'/call {tool} {{"name": "orders"}}', elicitation=False)))
        assert all(isinstance(i, str) for i in collected)
        text = "".join(str(i) for i in collected)
        assert text.startswith(f"Tool error: Tool {tool} needs input from the user")
        assert "x-supports-elicitation: true" in text


def test_an_anonymous_chat_gets_the_immediate_error_too(hub: RunningHub) -> None:
    with (
        hub.client(user=None) as client,
        client.stream(
            "POST",
            "/run/v1/chat/completions",
            json={"messages": [{"role": "user", "content": '/call mrtr.provision {"name": "x"}'}], "stream": True},
        ) as response,
    ):
        body = response.read().decode()
    assert response.status_code == 200
    assert "elicitation-request" not in body
    assert "needs input from the user" in body


def test_tools_without_questions_and_help_text(hub: RunningHub) -> None:
    assert "".join(str(i) for i in items(chat(hub, '/call legacy.echo {"text": "hi"}'))) == "echo: hi"
    help_text = "".join(str(i) for i in items(chat(hub, "hello")))
    assert "/call SERVER.TOOL" in help_text
    assert "mrtr.provision" in help_text and "legacy.echo" in help_text


def test_downstream_server_dying_mid_question_ends_the_stream_cleanly(make_hub: HubFactory) -> None:
    doomed = McpProcess("legacy_server.py")
    doomed_mrtr = McpProcess("mrtr_server.py")
    try:
        hub = make_hub(
            mcp_servers=[
                {"id": "doomed", "url": doomed.url, "protocol": "legacy"},
                {"id": "doomedmrtr", "url": doomed_mrtr.url},
            ]
        )
        for tool, server in (("doomed.provision", doomed), ("doomedmrtr.provision", doomed_mrtr)):
            stream = chat(hub, f'/call {tool} {{"name": "orders"}}')
            texts = []
            for item in items(stream):
                if isinstance(item, dict) and item["type"] == "elicitation-request":
                    server.kill()
                    hub.answer("alice", conversation(stream), item["elicitationId"], "accept", {"region": "us-east-1"})
                elif isinstance(item, str):
                    texts.append(item)
            text = "".join(texts)
            assert text.startswith(f"Tool error: The MCP server {tool.split('.')[0]} failed during provision"), text
    finally:
        doomed.kill()
        doomed_mrtr.kill()


def test_sampling_requests_are_answered_by_the_hubs_model(hub: RunningHub) -> None:
    text = "".join(str(i) for i in items(chat(hub, "/call mrtr.summarize {}")))
    assert text.startswith("scripted wrote ") and "starting 'Call a to'" in text


def test_stdio_server_asks_and_gets_the_answer(make_hub: HubFactory) -> None:
    import sys

    from tests.conftest import SERVERS

    command = [sys.executable, str(SERVERS / "legacy_server.py"), "stdio"]
    hub = make_hub(mcp_servers=[{"id": "local", "command": command, "protocol": "legacy"}])
    text, events = run_answering(hub, '/call local.provision {"name": "cache"}', [("accept", {"region": "us-east-1"})])
    assert events[0]["context"]["serverId"] == "local"
    assert text == "Provisioned cache in us-east-1."


def test_the_openai_client_reads_keep_alives_while_a_question_waits(make_hub: HubFactory) -> None:
    hub = make_hub(streams={"keepalive_s": 0.1})
    stream = chat(hub, '/call mrtr.provision {"name": "idle"}')
    texts: list[str] = []
    for item in items(stream):
        if isinstance(item, str):
            texts.append(item)
        elif item["type"] == "elicitation-request":
            time.sleep(0.3)  # three keep-alive intervals go by before the answer
            answered = hub.answer(
                "alice", conversation(stream), item["elicitationId"], "accept", {"region": "eu-west-1"}
            )
            assert answered.status_code == 200
    assert "".join(texts) == "Provisioned idle in eu-west-1."
