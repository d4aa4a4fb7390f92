"""The OpenAI-compatible model adapter, against a local stand-in that speaks the chat completions wire format."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from elicithub.runtime.models import ScriptedModel, ToolSpec
from tests.conftest import HubFactory, served
from tests.core.test_jsonwire import overflowing_literals
from tests.server.test_chat_openai import run_answering
from tests.server.test_chat_ui_stream import UIStream, text_of, text_part, ui_body


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "standin-1",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class StandIn:
    """Calls the one tool it is offered, then summarises the tool's result."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.arguments = '{"name": "orders"}'

    async def handle(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append({"body": body, "auth": request.headers.get("authorization")})
        last = body["messages"][-1]
        if last["role"] == "tool":
            return JSONResponse(completion({"role": "assistant", "content": f"The tool said: {last['content']}"}))
        tool = body["tools"][0]["function"]["name"]
        call = {"id": "call_1", "type": "function", "function": {"name": tool, "arguments": self.arguments}}
        return JSONResponse(completion({"role": "assistant", "content": None, "tool_calls": [call]}))


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, StandIn]]:
    monkeypatch.setenv("STANDIN_KEY", "sk-test-key")
    state = StandIn()
    app = Starlette(routes=[Route("/v1/chat/completions", state.handle, methods=["POST"])])
    with served(app) as server:
        yield f"{server.url}/v1", state


def test_openai_model_calls_the_tool_and_the_question_is_answered(
    make_hub: HubFactory, standin: tuple[str, StandIn], mrtr_server: Any
) -> None:
    url, state = standin
    hub = make_hub(
        model={"kind": "openai", "base_url": url, "model": "standin-1", "api_key_env": "STANDIN_KEY"},
        mcp_servers=[{"id": "deploy", "url": mrtr_server.url}],
    )
    text, events = run_answering(hub, "please provision orders", [("accept", {"region": "eu-west-1"})])
    assert events[0]["context"]["toolName"] == "provision"
    assert text == "The tool said: Provisioned orders in eu-west-1."
    first, second = state.requests[0], state.requests[-1]
    assert first["auth"] == "Bearer sk-test-key"
    assert {t["function"]["name"] for t in first["body"]["tools"]} >= {"deploy__provision"}
    tool_message = second["body"]["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "call_1", "content": "Provisioned orders in eu-west-1."}
    assert json.loads(second["body"]["messages"][-2]["tool_calls"][0]["function"]["arguments"]) == {"name": "orders"}


PROVISION = ToolSpec("deploy.provision", "Provision a database.", {"type": "object"})


def test_the_scripted_models_help_lists_each_tool_on_one_line_by_its_name() -> None:
    travel = ToolSpec(
        "travel.send_message",
        "Send a message to the A2A agent Travel: Books trips.\n- Book a flight: Books a flight.",
        {"type": "object"},
    )
    turn = asyncio.run(ScriptedModel().complete([{"role": "user", "content": "hello"}], [PROVISION, travel]))
    assert turn.text is not None
    listed = [line for line in turn.text.splitlines() if line.startswith("- ")]
    assert listed == [
        "- deploy.provision: Provision a database.",
        "- travel.send_message: Send a message to the A2A agent Travel: Books trips.",
    ]


@given(overflowing_literals())
def test_the_scripted_model_refuses_call_arguments_that_overflow(literal: str) -> None:
    turn = asyncio.run(
        ScriptedModel().complete(
            [{"role": "user", "content": f'/call deploy.provision {{"name": {literal}}}'}], [PROVISION]
        )
    )
    assert turn.tool_calls == []
    assert turn.text is not None and turn.text.startswith("The arguments for deploy.provision hold a non-finite number")
    assert "overflows to infinity" in turn.text


def test_arguments_a_model_writes_with_a_number_json_cannot_carry_never_reach_a_stream(
    make_hub: HubFactory, standin: tuple[str, StandIn], legacy_server: Any
) -> None:
    url, state = standin
    state.arguments = '{"name": 1e999}'
    hub = make_hub(
        model={"kind": "openai", "base_url": url, "model": "standin-1", "api_key_env": "STANDIN_KEY"},
        mcp_servers=[{"id": "legacy", "url": legacy_server.url, "protocol": "legacy"}],
    )
    stream = UIStream(hub.client(), ui_body("conv-model-inf", text_part("please provision")))
    parts = stream.rest()
    stream.close()
    [call] = [p for p in parts if p["type"] == "tool-input-available"]
    assert call["input"] == {}  # taken as no arguments, like arguments that are not JSON
    assert parts[-1]["type"] == "finish" and text_of(parts).startswith("The tool said: ")
