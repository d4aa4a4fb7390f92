"""`POST /run/agui` over a provider's model (the OpenAI stand-in, read by the provider's SDK through pydantic-ai):
text, thinking and tool-call arguments stream as the model writes them; the input's front-end tools are offered to
the model, a call of one ends the run for the client to make, and its result continues the thread; the input's
context reaches the instructions (DESIGN.md v5, "Models"). Streams are held with gates, never with time."""

from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
)

from elicithub.runtime.conversations import Caller
from elicithub.runtime.models.providers import NOT_MADE
from tests.conftest import USERS, HubFactory, RunningHub
from tests.models.script import Fail, Gate, Recorded, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn
from tests.surfaces.chat.agui_stream import checked, kinds, run, run_input, text
from tests.surfaces.chat.test_agui_client import AGUI, drive

needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not (AGUI / "node_modules").exists(),
    reason="needs node and tests/agui/node_modules (./scripts/test runs npm ci there when node is installed)",
)
KEY = "sk-standin-agui"
INSTRUCTIONS = "You are the release assistant of ACME."
BACKGROUND = {
    "name": "change_background",
    "description": "Change the page's background colour.",
    "parameters": {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]},
}


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelStandIn]:
    monkeypatch.setenv("STANDIN_KEY", KEY)
    with ModelStandIn() as server:
        yield server


def model_hub(make_hub: HubFactory, standin: ModelStandIn, provider: str = "openai") -> RunningHub:
    base_url = standin.openai_base_url if provider == "openai" else standin.anthropic_base_url
    model = {"id": "gpt", "provider": provider, "model": "standin-1", "base_url": base_url}
    model["api_key_env"] = "STANDIN_KEY"
    return make_hub(models=[model], model="gpt", agents=[{"id": "assistant", "instructions": INSTRUCTIONS}])


@pytest.fixture
def hub(make_hub: HubFactory, standin: ModelStandIn) -> RunningHub:
    return model_hub(make_hub, standin)


def offering(thread: str, words: str | None, *tools: dict[str, Any]) -> dict[str, Any]:
    body = run_input(thread, words)
    body["tools"] = list(tools)
    return body


def system_prompt(recorded: Recorded) -> str:
    return "".join(m["content"] for m in recorded.body["messages"] if m["role"] == "system")


def of_kind(events: list[BaseEvent], kind: str) -> list[Any]:
    return [e for e in events if e.type.value == kind]


def outcome(events: list[BaseEvent]) -> RunFinishedSuccessOutcome:
    last = events[-1]
    assert isinstance(last, RunFinishedEvent) and isinstance(last.outcome, RunFinishedSuccessOutcome), kinds(events)
    return last.outcome


class Streamed:
    """An AG-UI response read event by event, as it comes."""

    def __init__(self, response: httpx.Response) -> None:
        assert response.status_code == 200, response.read()
        self._lines = response.iter_lines()
        self.sent: list[Any] = []

    def next(self) -> Any:
        for line in self._lines:
            if line.startswith("data: "):
                self.sent.append(json.loads(line.removeprefix("data: ")))
                return self.sent[-1]
        raise AssertionError(f"the stream ended after {[e['type'] for e in self.sent]}")

    def rest(self) -> list[BaseEvent]:
        for line in self._lines:
            if line.startswith("data: "):
                self.sent.append(json.loads(line.removeprefix("data: ")))
        return checked(self.sent)


@contextlib.contextmanager
def streaming(hub: RunningHub, body: dict[str, Any]) -> Iterator[Streamed]:
    token = next(u["token"] for u in USERS if u["id"] == "alice")
    headers = {"authorization": f"Bearer {token}", "accept": "text/event-stream"}
    with (
        httpx.Client(base_url=hub.url, headers=headers, timeout=60) as client,
        client.stream("POST", "/run/agui", json=body) as response,
    ):
        yield Streamed(response)


# -- streaming


def test_the_first_words_reach_the_client_as_text_message_content_before_the_model_has_said_its_last(
    hub: RunningHub, standin: ModelStandIn
) -> None:
    gate = Gate()
    standin.reply(Text("Orders "), gate, Text("is deployed "), Text("in eu-west-1."))

    with streaming(hub, run_input("agui-streamed", "where is orders?")) as stream:
        while (first := stream.next())["type"] != "TEXT_MESSAGE_CONTENT":
            pass
        assert first["delta"] == "Orders "
        assert not gate.released.is_set()  # the model is still held: this came while it streamed
        gate.release()
        events = stream.rest()

    [start] = of_kind(events, "TEXT_MESSAGE_START")
    [end] = of_kind(events, "TEXT_MESSAGE_END")
    contents = of_kind(events, "TEXT_MESSAGE_CONTENT")
    assert len(contents) >= 2 and {c.message_id for c in contents} == {start.message_id} == {end.message_id}
    assert text(events) == "Orders is deployed in eu-west-1."
    assert kinds(events)[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]


def test_thinking_streams_as_a_reasoning_message_before_the_answer(make_hub: HubFactory, standin: ModelStandIn) -> None:
    hub = model_hub(make_hub, standin, "anthropic")
    standin.reply(Thinking("The user "), Thinking("asks where."), Text("In eu-west-1."))

    events = run(hub, run_input("agui-thinking", "where is orders?"))

    reasoning = ["REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT"]
    assert kinds(events)[1:4] == reasoning
    thought = "".join(e.delta for e in of_kind(events, "REASONING_MESSAGE_CONTENT"))
    assert thought == "The user asks where."
    ended = kinds(events).index("REASONING_END")
    assert kinds(events)[ended - 1 : ended + 2] == ["REASONING_MESSAGE_END", "REASONING_END", "TEXT_MESSAGE_START"]
    assert text(events) == "In eu-west-1." and outcome(events).pending_tool_call_ids is None


def test_a_retry_of_the_models_request_is_a_custom_model_status_event(hub: RunningHub, standin: ModelStandIn) -> None:
    standin.reply(Fail(429, "Slow down", retry_after=0))
    standin.reply(Text("Here."))

    events = run(hub, run_input("agui-retried", "hello"))

    [status] = of_kind(events, "CUSTOM")
    assert isinstance(status, CustomEvent) and status.name == "elicithub:model_status"
    assert status.value == {"message": "Model gpt is busy; retrying now."}
    assert text(events) == "Here."


def test_a_hub_tools_arguments_stream_as_tool_call_args_then_its_result_comes(
    hub: RunningHub, standin: ModelStandIn
) -> None:
    standin.reply(Text("Echoing."), ToolCall("legacy__echo", {"text": "hi there"}, id="call_echo", pieces=4))
    standin.reply(Text("It said hi there."))

    events = run(hub, run_input("agui-echo", "echo hi there"))

    [start] = of_kind(events, "TOOL_CALL_START")
    args = of_kind(events, "TOOL_CALL_ARGS")
    assert (start.tool_call_id, start.tool_call_name) == ("call_echo", "legacy.echo")
    assert start.parent_message_id == of_kind(events, "TEXT_MESSAGE_START")[0].message_id  # the turn's message
    assert len(args) >= 2 and json.loads("".join(a.delta for a in args)) == {"text": "hi there"}
    called = kinds(events).index("TOOL_CALL_END")
    assert kinds(events)[called + 1] == "TOOL_CALL_RESULT" and of_kind(events, "TOOL_CALL_RESULT")[0].content == (
        "echo: hi there"
    )
    assert text(events) == "Echoing.It said hi there." and outcome(events).pending_tool_call_ids is None


# -- front-end tools and context


def test_a_front_end_tool_is_offered_its_call_ends_the_run_and_its_result_continues_the_thread(
    hub: RunningHub, standin: ModelStandIn
) -> None:
    asked = standin.reply(Text("Changing it."), ToolCall("change_background", {"colour": "blue"}, id="call_bg"))

    first = run(hub, offering("agui-frontend", "Make it blue.", BACKGROUND))

    offered = {t["function"]["name"]: t["function"] for t in asked.served().body["tools"]}
    assert offered["change_background"]["description"] == BACKGROUND["description"]
    parameters = offered["change_background"]["parameters"]
    assert parameters | BACKGROUND["parameters"] == parameters  # as given (pydantic-ai may add `strict`'s keys)
    assert "legacy__echo" in offered  # beside the agent's own
    [start] = of_kind(first, "TOOL_CALL_START")
    assert (start.tool_call_id, start.tool_call_name) == ("call_bg", "change_background")
    args = of_kind(first, "TOOL_CALL_ARGS")
    assert len(args) >= 2 and json.loads("".join(a.delta for a in args)) == {"colour": "blue"}
    assert kinds(first)[-2:] == ["TOOL_CALL_END", "RUN_FINISHED"] and "TOOL_CALL_RESULT" not in kinds(first)
    assert outcome(first).pending_tool_call_ids == ["call_bg"]

    answered = standin.reply(Text("Done: "), Text("it is blue."))
    thread = [
        *offering("agui-frontend", "Make it blue.")["messages"],
        {
            "id": start.parent_message_id,
            "role": "assistant",
            "content": "Changing it.",
            "toolCalls": [
                {"id": "call_bg", "type": "function", "function": {"name": "change_background", "arguments": "{}"}}
            ],
        },
        {"id": "r1", "role": "tool", "toolCallId": "call_bg", "content": "The background is blue now."},
    ]
    body = offering("agui-frontend", None, BACKGROUND)
    body["messages"] = thread
    rest = run(hub, body)

    sent = answered.served().body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]  # no user message invented
    assert sent[2]["tool_calls"][0]["id"] == "call_bg"
    assert (sent[3]["tool_call_id"], sent[3]["content"]) == ("call_bg", "The background is blue now.")
    assert text(rest) == "Done: it is blue." and "TOOL_CALL_START" not in kinds(rest)
    assert outcome(rest).pending_tool_call_ids is None
    kept = hub.on_loop(hub.hub.conversations.transcript(Caller("alice"), "agui-frontend"))
    assert [m["role"] for m in kept] == ["user", "assistant", "tool", "assistant"]


def test_a_turn_calling_a_hub_tool_and_a_front_end_tool_makes_the_hubs_and_hands_the_other_over(
    hub: RunningHub, standin: ModelStandIn
) -> None:
    standin.reply(
        ToolCall("change_background", {"colour": "red"}, id="call_bg"),
        ToolCall("legacy__echo", {"text": "red"}, id="call_echo"),
    )

    first = run(hub, offering("agui-both", "Make it red and echo it.", BACKGROUND))

    assert [e.tool_call_id for e in of_kind(first, "TOOL_CALL_RESULT")] == ["call_echo"]
    ends = [e.tool_call_id for e in of_kind(first, "TOOL_CALL_END")]
    assert ends == ["call_echo", "call_bg"]  # the hub's call is made first; the client's ends the run
    assert [e.tool_call_id for e in of_kind(first, "TOOL_CALL_START")] == ["call_bg", "call_echo"]
    assert outcome(first).pending_tool_call_ids == ["call_bg"]

    answered = standin.reply(Text("Red, and echoed."))
    body = offering("agui-both", None, BACKGROUND)
    body["messages"] = [
        *offering("agui-both", "Make it red and echo it.")["messages"],
        {"id": "m", "role": "assistant", "toolCalls": [_call("call_bg"), _call("call_echo")]},
        {"id": "call_echo-result", "role": "tool", "toolCallId": "call_echo", "content": "echo: red"},  # as streamed
        {"id": "r", "role": "tool", "toolCallId": "call_bg", "content": "It is red.", "error": None},
    ]
    rest = run(hub, body)

    sent = answered.served().body["messages"]
    results = [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"]
    assert results == [("call_echo", "echo: red"), ("call_bg", "It is red.")]  # the hub's result once
    assert text(rest) == "Red, and echoed."


def test_a_front_end_call_left_without_its_result_is_told_to_the_model_as_not_made(
    hub: RunningHub, standin: ModelStandIn
) -> None:
    standin.reply(ToolCall("change_background", {"colour": "green"}, id="call_bg"))
    assert outcome(run(hub, offering("agui-left", "Make it green.", BACKGROUND))).pending_tool_call_ids == ["call_bg"]
    answered = standin.reply(Text("Never mind, then."))

    rest = run(hub, run_input("agui-left", "Actually, leave it."))

    sent = answered.served().body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    assert (sent[3]["tool_call_id"], sent[3]["content"]) == ("call_bg", NOT_MADE)
    assert text(rest) == "Never mind, then."


def test_the_inputs_context_is_added_to_the_agents_instructions(hub: RunningHub, standin: ModelStandIn) -> None:
    asked = standin.reply(Text("You are on billing."))
    body = run_input("agui-context", "Where am I?")
    body["context"] = [
        {"description": "The page the user is on", "value": "/settings/billing"},
        {"description": "The user's plan", "value": '{"plan": "team"}'},
    ]

    assert text(run(hub, body)) == "You are on billing."

    prompt = system_prompt(asked.served())
    assert prompt.startswith(INSTRUCTIONS)
    assert "The page the user is on:\n/settings/billing" in prompt and 'The user\'s plan:\n{"plan": "team"}' in prompt


@pytest.mark.parametrize(
    ("call_id", "thread"),
    [("call_nothing", "agui-unknown-call"), ("call_bg", "agui-no-such-thread")],
    ids=["unknown-call", "unknown-thread"],
)
def test_a_result_for_a_call_that_waits_for_none_is_unknown_tool_call_and_takes_nothing(
    hub: RunningHub, standin: ModelStandIn, call_id: str, thread: str
) -> None:
    if thread == "agui-unknown-call":
        standin.reply(ToolCall("change_background", {"colour": "blue"}, id="call_bg"))
        run(hub, offering(thread, "Make it blue.", BACKGROUND))
    asked = len(standin.requests)
    body = offering(thread, None, BACKGROUND)
    body["messages"] = [{"id": "r", "role": "tool", "toolCallId": call_id, "content": "done"}]

    events = run(hub, body)

    assert kinds(events) == ["RUN_STARTED", "RUN_ERROR"]
    error = events[-1]
    assert isinstance(error, RunErrorEvent) and error.code == "unknown_tool_call" and call_id in error.message
    assert len(standin.requests) == asked  # the model was not asked


@pytest.mark.parametrize(
    ("name", "problem"),
    [("deploy.run", "deploy.run"), ("legacy__echo", "__"), ("change background", "change background")],
)
def test_a_front_end_tool_whose_name_could_be_the_hubs_is_invalid_payload(
    hub: RunningHub, standin: ModelStandIn, name: str, problem: str
) -> None:
    events = run(hub, offering(f"agui-name-{uuid.uuid4()}", "hello", {**BACKGROUND, "name": name}))

    error = events[-1]
    assert isinstance(error, RunErrorEvent) and error.code == "invalid_payload"
    assert "tools[0].name" in error.message and problem in error.message
    assert standin.requests == []


def test_a_front_end_tool_offered_twice_is_invalid_payload(hub: RunningHub, standin: ModelStandIn) -> None:
    events = run(hub, offering("agui-twice-offered", "hello", BACKGROUND, BACKGROUND))

    error = events[-1]
    assert isinstance(error, RunErrorEvent) and error.code == "invalid_payload" and "tools[1].name" in error.message


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "t", "arguments": "{}"}}


# -- the official client


@needs_node
def test_the_ag_ui_client_reads_the_streams_makes_the_front_end_call_and_the_run_goes_on(
    hub: RunningHub, standin: ModelStandIn
) -> None:
    standin.reply(Text("Changing "), Text("it."), ToolCall("change_background", {"colour": "teal"}, id="call_bg"))
    answered = standin.reply(Text("It is "), Text("teal now."))

    seen, ended = drive(
        hub, f"agui-client-{uuid.uuid4()}", "Make it teal.", [], [BACKGROUND], {"change_background": "Done."}
    )

    assert ended["errors"] == [] and ended["warnings"] == []
    [[call]] = [said["toolCalls"] for said in seen]
    assert call == {"id": "call_bg", "name": "change_background", "arguments": {"colour": "teal"}}
    assert ended["outcomes"] == ["success", "success"]
    user, assistant, tool, answer = ended["messages"]
    assert (user["role"], assistant["content"], assistant["toolCalls"]) == (
        "user",
        "Changing it.",
        [{"id": "call_bg", "name": "change_background"}],
    )
    assert (tool["toolCallId"], tool["content"]) == ("call_bg", "Done.")
    assert (answer["role"], answer["content"]) == ("assistant", "It is teal now.")
    assert ended["events"].count("TOOL_CALL_ARGS") >= 2 and ended["events"].count("TEXT_MESSAGE_CONTENT") >= 4
    sent = answered.served().body["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent][-2:] == [("assistant", None), ("tool", "call_bg")]


@needs_node
def test_the_ag_ui_client_reads_a_streamed_reasoning_message(make_hub: HubFactory, standin: ModelStandIn) -> None:
    hub = model_hub(make_hub, standin, "anthropic")
    standin.reply(Thinking("Where "), Thinking("is it?"), Text("In "), Text("eu-west-1."))

    _, ended = drive(hub, f"agui-client-{uuid.uuid4()}", "where is orders?", [])

    assert ended["errors"] == [] and ended["warnings"] == []
    assert [m["role"] for m in ended["messages"]] == ["user", "reasoning", "assistant"]
    assert ended["messages"][1]["content"] == "Where is it?" and ended["messages"][2]["content"] == "In eu-west-1."
