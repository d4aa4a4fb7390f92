"""The scripted model, and v1's OpenAI-compatible model config against a stand-in of the chat completions API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from mcp.server import Server, ServerRequestContext
from mcp_types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams, TextContent, Tool

from elicithub.runtime.models import ScriptedModel, ToolSpec
from tests.conftest import HubFactory, served
from tests.core.test_jsoncodec import overflowing_literals
from tests.models.script import Text, ToolCall
from tests.models.standins import ModelStandIn
from tests.server.test_chat_openai import run_answering
from tests.server.test_chat_ui_stream import UIStream, text_of, text_part, ui_body


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelStandIn]:
    monkeypatch.setenv("STANDIN_KEY", "sk-test-key")
    with ModelStandIn() as server:
        yield server


def v1_model(standin: ModelStandIn) -> dict[str, Any]:
    """v1's `model: {kind: openai, ...}`, which keeps working (an OpenAI-compatible endpoint)."""
    return {"kind": "openai", "base_url": standin.openai_base_url, "model": "standin-1", "api_key_env": "STANDIN_KEY"}


def test_openai_model_calls_the_tool_and_the_question_is_answered(
    make_hub: HubFactory, standin: ModelStandIn, mrtr_server: Any
) -> None:
    hub = make_hub(model=v1_model(standin), mcp_servers=[{"id": "deploy", "url": mrtr_server.url}])
    standin.reply(ToolCall("deploy__provision", {"name": "orders"}, id="call_1"))
    standin.reply(Text("The tool said: "), Text("Provisioned orders in eu-west-1."))
    text, events = run_answering(hub, "please provision orders", [("accept", {"region": "eu-west-1"})])
    assert events[0]["context"]["toolName"] == "provision"
    assert text == "The tool said: Provisioned orders in eu-west-1."
    first, second = standin.requests[0], standin.requests[-1]
    assert first.headers["authorization"] == "Bearer sk-test-key"
    assert {t["function"]["name"] for t in first.body["tools"]} >= {"deploy__provision"}
    tool_message = second.body["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "call_1", "content": "Provisioned orders in eu-west-1."}
    assert json.loads(second.body["messages"][-2]["tool_calls"][0]["function"]["arguments"]) == {"name": "orders"}


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
    make_hub: HubFactory, standin: ModelStandIn, recorder: Recorder
) -> None:
    standin.reply(ToolCall("rec__provision", '{"name": 1e999}', id="call_1"))
    told = standin.reply(Text("Sorry, I could not."))
    hub = make_hub(model=v1_model(standin), mcp_servers=[{"id": "rec", "url": recorder.url}])
    stream = UIStream(hub.client(), ui_body("conv-model-inf", text_part("please provision")))
    parts = stream.rest()
    stream.close()
    [call] = [p for p in parts if p["type"] == "tool-input-available"]
    assert call["input"] == {}  # shown without arguments, and not made
    [failed] = [p for p in parts if p["type"] == "tool-output-error"]
    assert failed["errorText"].startswith("The arguments for rec.provision hold a non-finite number")
    assert parts[-1]["type"] == "finish" and text_of(parts) == "Sorry, I could not."
    assert told.served().body["messages"][-1]["content"] == failed["errorText"]  # the model was told why
    assert recorder.calls == []


class Recorder:
    """A downstream MCP server (the SDK's low-level Server) whose one tool records the arguments of every call."""

    def __init__(self, url: str, calls: list[dict[str, Any]]) -> None:
        self.url = url
        self.calls = calls


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    calls: list[dict[str, Any]] = []

    async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        return ListToolsResult(tools=[Tool(name="provision", description="Provision a database.", input_schema=schema)])

    async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
        calls.append(dict(params.arguments or {}))
        name = (params.arguments or {}).get("name")
        return CallToolResult(content=[TextContent(type="text", text=f"Provisioned {name}.")])

    server = Server("recorder", on_list_tools=list_tools, on_call_tool=call_tool)
    with served(server.streamable_http_app()) as app:
        yield Recorder(f"{app.url}/mcp", calls)


@pytest.mark.parametrize(
    ("written", "why"),
    [('{"name": "orders",', "are not valid JSON"), ('["orders"]', "must be a JSON object")],
    ids=["not-json", "not-an-object"],
)
def test_arguments_a_model_writes_that_are_not_a_json_object_are_its_tool_error_and_it_calls_again(
    make_hub: HubFactory, standin: ModelStandIn, recorder: Recorder, written: str, why: str
) -> None:
    standin.reply(ToolCall("rec__provision", written, id="call_1"))
    standin.reply(ToolCall("rec__provision", {"name": "orders"}, id="call_2"))
    standin.reply(Text("The tool said: Provisioned orders."))
    hub = make_hub(model=v1_model(standin), mcp_servers=[{"id": "rec", "url": recorder.url}])
    stream = UIStream(hub.client(), ui_body(f"conv-model-{why[:3]}", text_part("please provision")))
    parts = stream.rest()
    stream.close()
    assert recorder.calls == [{"name": "orders"}]  # never with no arguments, nor with what could not be read
    # The model was told, as the broken call's result, why its arguments could not be used...
    told = standin.requests[1].body["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "call_1"
    assert told["content"].startswith(f"The arguments for rec.provision {why}")
    assert "The tool was not called" in told["content"]
    # ...and the person's stream shows the call failing with that error, then the retry going through.
    [failed] = [p for p in parts if p["type"] == "tool-output-error"]
    assert (failed["toolCallId"], failed["errorText"]) == ("call_1", told["content"])
    [done] = [p for p in parts if p["type"] == "tool-output-available"]
    assert done["toolCallId"] == "call_2" and done["output"] == "Provisioned orders."
    assert parts[-1]["type"] == "finish" and text_of(parts) == "The tool said: Provisioned orders."
