"""A model's turn as it streams, read by the AI SDK's own client (`ai` 5 and 6, pinned in tests/aisdk) from a hub
whose model is a provider's real one (pydantic-ai and the provider's SDK) pointed at the stand-in: text piece by
piece before the model's last, thinking as reasoning parts, a call's arguments as they are written, a question
asked by the call, a retry's status, and a reattach that replays a finished turn; the SDK reads each without an
error and ends with valid messages."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HubFactory, RunningHub
from tests.core_fixtures import DEADLINE_S
from tests.models.hubs import standin_models
from tests.models.script import Fail, Gate, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn
from tests.server.test_chat_ui_stream import UIStream, text_part, ui_body

AISDK = Path(__file__).resolve().parents[2] / "aisdk"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (AISDK / "node_modules").exists(),
    reason="needs node and tests/aisdk/node_modules (./scripts/test runs npm ci there when node is installed)",
)


class Driven:
    """drive.mjs running one scenario against the hub: the first text it shows as it shows it, then what it ended
    with."""

    def __init__(self, hub: RunningHub, version: str, scenario: str, conversation: str, message: str) -> None:
        command = ["node", "drive.mjs", version, hub.url, "alice-secret", scenario, conversation, message]
        self.process = subprocess.Popen(command, cwd=AISDK, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def first_text(self) -> str:
        """Blocks until the SDK shows some of the reply's text (the test's timeout ends a test that would hang)."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, self.result()
        first: str = json.loads(line)["first"]
        return first

    def result(self) -> dict[str, Any]:
        out, err = self.process.communicate(timeout=DEADLINE_S)
        assert self.process.returncode == 0, err
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        assert result["errors"] == [] and result["valid"] and result["status"] == "ready"
        return result


def drive(hub: RunningHub, scenario: str, conversation: str, message: str, version: str = "ai6") -> dict[str, Any]:
    return Driven(hub, version, scenario, conversation, message).result()


@pytest.fixture
def hub(make_hub: HubFactory, model_standin: ModelStandIn) -> RunningHub:
    return make_hub(**standin_models(model_standin))


def between(chunks: list[str], first: str, last: str) -> list[str]:
    return chunks[chunks.index(first) : chunks.index(last) + 1]


def squeezed(chunks: list[str]) -> list[str]:
    """The chunk types with each run of one type once: how many pieces a part came in depends on when its reader
    began to follow (what streamed before comes as one piece)."""
    return [kind for i, kind in enumerate(chunks) if i == 0 or chunks[i - 1] != kind]


@pytest.mark.parametrize("version", ["ai5", "ai6"])
def test_text_reaches_the_sdk_piece_by_piece_before_the_model_s_last(
    hub: RunningHub, model_standin: ModelStandIn, version: str
) -> None:
    gate = Gate()
    model_standin.reply(Text("Hello "), gate, Text("there, "), Text("Alice."))
    driven = Driven(hub, version, "say", f"stream-text-{version}", "hi")
    gate.reached.wait()
    assert driven.first_text() == "Hello "  # shown while the model still holds the rest
    gate.release()
    result = driven.result()
    [_, assistant] = result["messages"]
    assert assistant["text"] == "Hello there, Alice."
    assert assistant["types"] == ["step-start", "text"]  # one text part, however many pieces
    chunks = result["chunks"][0]
    assert between(chunks, "text-start", "text-end") == ["text-start", *["text-delta"] * 3, "text-end"]
    assert chunks[-3:] == ["finish-step", "finish", "[DONE]"]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_thinking_is_a_reasoning_part_before_the_text(
    make_hub: HubFactory, model_standin: ModelStandIn, provider: str
) -> None:
    hub = make_hub(**standin_models(model_standin, provider))
    model_standin.reply(Thinking("Order 42 "), Thinking("shipped on Monday."), Text("It "), Text("shipped."))
    result = drive(hub, "say", f"stream-thinking-{provider}", "Where is order 42?")
    [_, assistant] = result["messages"]
    assert assistant["reasoning"] == [{"text": "Order 42 shipped on Monday.", "state": "done"}]
    assert assistant["text"] == "It shipped."
    assert assistant["types"] == ["step-start", "reasoning", "text"]
    chunks = result["chunks"][0]
    assert squeezed(between(chunks, "reasoning-start", "text-end")) == [
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
    ]


def test_a_call_s_arguments_stream_then_its_question_is_answered_and_the_run_goes_on(
    hub: RunningHub, model_standin: ModelStandIn
) -> None:
    gate = Gate()
    model_standin.reply(Text("Provisioning."), gate, ToolCall("mrtr__provision", {"name": "orders"}, pieces=3))
    model_standin.reply(Text("Done: "), Text("orders is in eu-west-1."))
    driven = Driven(hub, "ai6", "say", "stream-call", "Provision orders.")
    assert driven.first_text() == "Provisioning."  # the SDK reads the turn live: the call's first piece is to come
    gate.release()
    result = driven.result()
    assert len(result["asked"]) == 1  # the call's question, answered at the answer endpoint
    [_, assistant] = result["messages"]
    [tool] = assistant["tools"]
    assert tool["toolName"] == "mrtr.provision" and tool["input"] == {"name": "orders"}
    assert tool["state"] == "output-available" and tool["output"] == "Provisioned orders in eu-west-1."
    assert assistant["text"] == "Provisioning.Done: orders is in eu-west-1."
    asked = ["data-elicitation-request", "data-elicitation-resolved"]
    assert assistant["types"] == ["step-start", "text", "dynamic-tool", *asked, "step-start", "text"]
    chunks = result["chunks"][0]
    streamed = between(chunks, "tool-input-start", "tool-input-available")
    assert streamed == ["tool-input-start", *["tool-input-delta"] * (len(streamed) - 2), "tool-input-available"]
    assert len(streamed) >= 4  # the arguments came in pieces
    assert chunks.count("tool-input-start") == 1
    # The model was told the call's result.
    told = model_standin.request(1).body["messages"][-1]
    assert told["role"] == "tool" and told["content"] == "Provisioned orders in eu-west-1."


def test_a_call_s_streamed_input_names_the_tool_as_the_hub_does_and_adds_up_to_its_input(
    hub: RunningHub, model_standin: ModelStandIn
) -> None:
    """Read raw: the SDK's part takes its name from `tool-input-available` in the end, a page shows the first one."""
    gate = Gate()
    model_standin.reply(Text("Provisioning."), gate, ToolCall("mrtr__provision", {"name": "orders"}, pieces=4))
    stream = UIStream(hub.client(), ui_body("stream-call-raw", text_part("Provision orders.")))
    stream.until("text-delta")  # read live: the call's first piece is to come
    gate.release()
    parts = stream.until("tool-input-available")
    stream.close()
    [start] = [p for p in parts if p["type"] == "tool-input-start"]
    assert (start["toolName"], start["dynamic"]) == ("mrtr.provision", True)
    pieces = [p["inputTextDelta"] for p in parts if p["type"] == "tool-input-delta"]
    assert len(pieces) >= 2 and json.loads("".join(pieces)) == {"name": "orders"}
    assert parts[-1]["toolName"] == "mrtr.provision" and parts[-1]["input"] == {"name": "orders"}


def test_a_retry_shows_the_model_s_status_then_the_answer(hub: RunningHub, model_standin: ModelStandIn) -> None:
    model_standin.reply(Fail(429, "Slow down.", retry_after=0))
    model_standin.reply(Text("Back "), Text("again."))
    result = drive(hub, "say", "stream-retry", "hi")
    status = {"type": "data-model-status", "data": {"message": "Model gpt is busy; retrying now."}}
    assert result["data"] == [{**status, "transient": True}]
    [_, assistant] = result["messages"]
    assert assistant["text"] == "Back again."
    assert "data-model-status" not in assistant["types"]  # transient: in no message
    chunks = result["chunks"][0]
    assert chunks.index("data-model-status") < chunks.index("text-start")


def test_a_page_that_reattaches_gets_a_finished_turn_s_text_whole_then_the_rest_live(
    hub: RunningHub, model_standin: ModelStandIn
) -> None:
    model_standin.reply(Text("Let me "), Text("provision."), ToolCall("mrtr__provision", {"name": "orders"}))
    model_standin.reply(Text("Provisioned "), Text("it."))
    result = drive(hub, "reattach", "stream-reattach", "Provision orders.")
    assert result["requests"] == ["POST /run/api/chat", "GET /run/api/chat/stream-reattach/stream"]
    replayed = result["chunks"][1]
    assert between(replayed, "text-start", "tool-input-available") == [
        "text-start",
        "text-delta",  # the turn ended before the page came back: its text in one piece
        "text-end",
        "tool-input-available",
    ]
    [assistant] = [m for m in result["messages"] if m["role"] == "assistant"]
    assert assistant["text"] == "Let me provision.Provisioned it."
    [tool] = assistant["tools"]
    assert tool["state"] == "output-available" and tool["input"] == {"name": "orders"}
