"""Real models, streamed: a hub whose agents run on providers' models (pydantic-ai over the providers' own SDKs),
against stand-ins of each provider's wire format, read through the hub's OpenAI-compatible surface by the `openai`
client and through the UI message stream. Streams are held with gates, never with time."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI

from elicithub.core.runs import conversation_key
from elicithub.runtime.models.context import estimate_tokens, message_tokens
from tests.conftest import HubFactory, McpProcess, RunningHub, sse_data, sse_numbered
from tests.models.script import Fail, Gate, Hang, Recorded, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn
from tests.server.test_chat_openai import conversation, items
from tests.server.test_chat_ui_stream import UIStream, text_of, text_part, ui_body

KEY = "sk-standin-0123456789abcdef"
PROVIDERS = ["openai", "anthropic", "google"]
INSTRUCTIONS = "You are the release assistant of ACME. Answer in one sentence."


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelStandIn]:
    monkeypatch.setenv("STANDIN_KEY", KEY)
    with ModelStandIn() as server:
        yield server


def entry(standin: ModelStandIn, provider: str, model_id: str = "gpt", model: str = "standin-1", **more: Any) -> Any:
    base_url = {
        "openai": standin.openai_base_url,
        "anthropic": standin.anthropic_base_url,
        "google": standin.google_base_url,
    }[provider]
    given = {"id": model_id, "provider": provider, "model": model, "base_url": base_url, "api_key_env": "STANDIN_KEY"}
    return given | more


def system_prompt(recorded: Recorded) -> str:
    """The system prompt a request carried, in its provider's shape."""
    body = recorded.body
    if recorded.provider == "openai":
        return "".join(m["content"] for m in body["messages"] if m["role"] == "system")
    if recorded.provider == "anthropic":
        system = body.get("system", "")
        return system if isinstance(system, str) else "".join(b["text"] for b in system)
    return "".join(p["text"] for p in body.get("systemInstruction", {}).get("parts", []))


def chat(hub: RunningHub, text: str, model: str = "assistant", **kw: Any) -> Any:
    client = OpenAI(
        base_url=f"{hub.url}/run/v1",
        api_key="alice-secret",
        default_headers={"x-supports-elicitation": "true", **kw.pop("headers", {})},
        max_retries=0,
    )
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], stream=True, **kw)


def logged(hub: RunningHub, conversation_id: str) -> list[dict[str, Any]]:
    """The conversation's event log as stored."""
    key = conversation_key("alice", conversation_id)
    return [data for _, data in hub.on_loop(hub.hub.backend.events.read(key))]


def metric(hub: RunningHub, name: str, **labels: str) -> float:
    """One sample of `/metrics` (0 when absent)."""
    text = httpx.get(f"{hub.url}/metrics").text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{"):
            series, value = line.rsplit(" ", 1)
            given = series[len(name) + 1 : -1].split(",")
            if ",".join(sorted(given)) == wanted:
                return float(value)
    return 0.0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_first_words_reach_the_reader_before_the_model_has_said_its_last(
    make_hub: HubFactory, standin: ModelStandIn, provider: str
) -> None:
    hub = make_hub(
        models=[entry(standin, provider)],
        model="gpt",
        agents=[{"id": "assistant", "instructions": INSTRUCTIONS}],
    )
    gate = Gate()
    reply = standin.reply(Text("Orders "), gate, Text("is deployed "), Text("in eu-west-1."))
    pieces = items(chat(hub, "where is orders?"))
    first = next(pieces)
    assert first == "Orders "
    assert not gate.released.is_set()  # the model is still held: this came while it streamed
    gate.release()
    assert first + "".join(str(p) for p in pieces) == "Orders is deployed in eu-west-1."
    recorded = reply.served()
    assert system_prompt(recorded) == INSTRUCTIONS
    assert KEY in (recorded.headers.get("authorization", "") + recorded.headers.get("x-goog-api-key", ""))


def test_each_agent_reaches_its_own_model_with_its_own_instructions(
    make_hub: HubFactory, standin: ModelStandIn
) -> None:
    hub = make_hub(
        models=[
            entry(standin, "openai", "gpt", "gpt-standin"),
            entry(standin, "anthropic", "claude", "claude-standin", settings={"max_tokens": 300}),
        ],
        model="gpt",
        agents=[
            {"id": "assistant", "instructions": "You are the assistant."},
            {"id": "researcher", "model": "claude", "instructions": "You research.", "max_steps": 3},
        ],
    )
    to_claude = standin.reply(Text("From Claude."), model="claude-standin")
    to_gpt = standin.reply(Text("From GPT."), model="gpt-standin")
    assert "".join(str(p) for p in items(chat(hub, "hello", model="researcher"))) == "From Claude."
    assert "".join(str(p) for p in items(chat(hub, "hello"))) == "From GPT."
    claude, gpt = to_claude.served(), to_gpt.served()
    assert (claude.provider, system_prompt(claude), claude.body["max_tokens"]) == ("anthropic", "You research.", 300)
    assert (gpt.provider, system_prompt(gpt)) == ("openai", "You are the assistant.")
    tokens = metric(hub, "elicithub_model_tokens_total", model="claude", agent="researcher", type="input")
    assert tokens == 10  # the stand-in's usage, counted for the model and the agent
    assert metric(hub, "elicithub_model_tokens_total", model="gpt", agent="assistant", type="output") == 5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_tool_call_streams_asks_the_person_and_the_model_goes_on_with_its_result(
    make_hub: HubFactory, standin: ModelStandIn, mrtr_server: McpProcess, provider: str
) -> None:
    hub = make_hub(models=[entry(standin, provider)], model="gpt")
    name = f"streamed-{provider}"
    standin.reply(Thinking(f"The user wants {name} provisioned."), ToolCall("mrtr__provision", {"name": name}))
    second = standin.reply(Text("Provisioned "), Text(f"{name} in eu-west-1."))
    stream = chat(hub, f"provision {name}")
    text, asked = "", []
    for item in items(stream):
        if isinstance(item, str):
            text += item
        elif item["type"] == "elicitation-request":
            asked.append(item)
            answered = hub.answer(
                "alice", conversation(stream), item["elicitationId"], "accept", {"region": "eu-west-1"}
            )
            assert answered.status_code == 200, answered.text
    assert text == f"Provisioned {name} in eu-west-1."
    assert [a["context"]["toolName"] for a in asked] == ["provision"]
    # The model's next request carried the call, with the arguments it streamed, and the tool's result.
    [call] = [e for e in logged(hub, conversation(stream)) if e["type"] == "tool-started"]
    assert call["arguments"] == {"name": name}
    [result] = [e["text"] for e in logged(hub, conversation(stream)) if e["type"] == "tool-finished"]
    assert result in json.dumps(second.served().body) and name in result
    assert hub.downstream_calls("provision", name) == 2  # the round that asked and its retry: none more


def test_a_busy_provider_is_retried_before_the_first_token_and_the_stream_says_so(
    make_hub: HubFactory, standin: ModelStandIn
) -> None:
    hub = make_hub(models=[entry(standin, "anthropic", max_retries=3)], model="gpt")
    standin.reply(Fail(429, "Slow down", retry_after=0))
    standin.reply(Fail(529, "Overloaded", retry_after=0))
    standin.reply(Text("Here at last."))
    stream = chat(hub, "hello")
    assert "".join(str(p) for p in items(stream)) == "Here at last."
    statuses = [e["text"] for e in logged(hub, conversation(stream)) if e["type"] == "model-status"]
    assert statuses == ["Model gpt is busy; retrying now."] * 2
    assert metric(hub, "elicithub_model_requests_total", model="gpt", outcome="retried") == 2
    assert metric(hub, "elicithub_model_requests_total", model="gpt", outcome="ok") == 1
    assert metric(hub, "elicithub_model_first_token_seconds_count", model="gpt") == 1


def test_retries_run_out_and_the_run_ends_naming_the_model_and_the_providers_words(
    make_hub: HubFactory, standin: ModelStandIn
) -> None:
    hub = make_hub(models=[entry(standin, "openai", max_retries=1)], model="gpt")
    standin.reply(Fail(503, "The server is overloaded", retry_after=0))
    standin.reply(Fail(503, "The server is overloaded", retry_after=0))
    text = "".join(str(p) for p in items(chat(hub, "hello")))
    assert text == "Model gpt failed: 503 The server is overloaded"
    assert metric(hub, "elicithub_model_requests_total", model="gpt", outcome="error") == 1
    assert standin.unused() == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_key_ends_the_run_with_the_providers_words_and_never_the_key(
    make_hub: HubFactory, standin: ModelStandIn, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hub = make_hub(models=[entry(standin, provider)], model="gpt")
    standin.reply(Fail(401, f"Incorrect API key provided: {KEY}."))
    stream = chat(hub, "hello")
    text = "".join(str(p) for p in items(stream))
    assert text == "Model gpt failed: 401 Incorrect API key provided: ***."
    assert len(standin.requests) == 1  # a refused key is not retried
    assert KEY not in caplog.text
    assert KEY not in json.dumps(logged(hub, conversation(stream)))
    assert KEY not in httpx.get(f"{hub.url}/metrics").text


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_new_message_closes_the_model_stream_at_once_and_keeps_what_it_said(
    make_hub: HubFactory, standin: ModelStandIn, provider: str
) -> None:
    hub = make_hub(models=[entry(standin, provider)], model="gpt")
    standin.reply(Text("Let me think"), Hang())
    first = chat(hub, "a long question")
    pieces = items(first)
    assert next(pieces) == "Let me think"
    standin.reply(Text("Short answer."))
    second = chat(hub, "never mind", headers={"x-conversation-id": conversation(first)})
    standin.requests[0].disconnected.wait()  # the provider's stream was closed: it stops billing
    assert list(pieces) == []  # the first run ended with what it had said
    assert "".join(str(p) for p in items(second)) == "Short answer."
    said = [e["text"] for e in logged(hub, conversation(first)) if e["type"] == "model-said"]
    assert said == ["Let me think", "Short answer."]


def test_a_provider_that_sends_nothing_within_the_timeout_is_an_error(
    make_hub: HubFactory, standin: ModelStandIn
) -> None:
    hub = make_hub(models=[entry(standin, "openai", timeout_s=0.5)], model="gpt")
    standin.reply(Hang())
    text = "".join(str(p) for p in items(chat(hub, "hello")))
    assert text == "Model gpt failed: no complete answer within 0.5 s."
    standin.requests[0].disconnected.wait()


def test_the_usage_chunk_comes_last_when_the_request_asks_for_it(make_hub: HubFactory, standin: ModelStandIn) -> None:
    hub = make_hub(models=[entry(standin, "openai")], model="gpt")
    standin.reply(Text("Counted."), input_tokens=120, output_tokens=7)
    chunks = list(chat(hub, "hello", stream_options={"include_usage": True}))
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (120, 7)
    standin.reply(Text("Not counted."))
    assert all(c.usage is None for c in chat(hub, "again"))


def test_a_long_conversation_is_cut_to_the_window_in_whole_turns_with_calls_beside_their_results(
    make_hub: HubFactory, standin: ModelStandIn
) -> None:
    hub = make_hub(
        models=[entry(standin, "openai", context_tokens=3000, settings={"max_tokens": 500})],
        model="gpt",
        agents=[{"id": "assistant", "instructions": INSTRUCTIONS}],
    )
    history: list[dict[str, Any]] = []
    for turn in range(500):
        history.append({"role": "user", "content": f"Question {turn}: how is service {turn} doing today?"})
        call = {"id": f"call_{turn}", "type": "function", "function": {"name": "mrtr__status", "arguments": "{}"}}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": f"Service {turn} is healthy."})
        history.append({"role": "assistant", "content": f"Service {turn} is fine."})
    reply = standin.reply(Text("All fine."))
    client = OpenAI(base_url=f"{hub.url}/run/v1", api_key="alice-secret", max_retries=0)
    messages: Any = [*history, {"role": "user", "content": "And now?"}]
    stream = client.chat.completions.create(model="assistant", messages=messages, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "All fine."
    sent = reply.served().body["messages"]
    assert sent[0] == {"role": "system", "content": INSTRUCTIONS}
    assert sent[-1] == {"role": "user", "content": "And now?"}
    kept = sent[1:]
    assert 4 < len(kept) < len(history)
    assert kept[0]["role"] == "user"  # whole turns, the oldest cut at a turn's start
    calls = [c["id"] for m in kept if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    results = [m["tool_call_id"] for m in kept if m["role"] == "tool"]
    assert calls == results
    used = estimate_tokens(INSTRUCTIONS) + sum(message_tokens(m) for m in kept)
    assert used <= 3000 - 500


def test_a_reader_that_comes_back_mid_turn_gets_the_text_so_far_once_then_the_rest(
    make_hub: HubFactory, standin: ModelStandIn
) -> None:
    hub = make_hub(models=[entry(standin, "openai")], model="gpt")
    gate = Gate()
    standin.reply(Text("Hel"), Text("lo, "), gate, Text("world."))
    first = UIStream(hub.client(), ui_body("conv-mid-turn", text_part("hi")))
    seen = first.until("text-delta")
    while text_of(seen) != "Hello, ":
        seen += first.until("text-delta")
    with hub.client().stream("GET", "/run/api/chat/conv-mid-turn/stream") as again:
        parts = sse_data(again)
        replayed = []
        for part in parts:
            replayed.append(part)
            if part["type"] == "text-delta":
                break
        assert text_of(replayed) == "Hello, "  # the text so far, once
        gate.release()
        replayed += list(parts)
    assert text_of(replayed) == "Hello, world."
    assert text_of(seen + first.rest()) == "Hello, world."
    first.close()


@pytest.fixture(params=["redis", "postgres"])
def shared_store(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue("postgres_url"))


def test_a_reader_on_another_hub_sees_the_words_as_the_model_streams_them(
    make_hub: HubFactory, standin: ModelStandIn, shared_store: str
) -> None:
    here = make_hub(models=[entry(standin, "openai")], model="gpt", store={"url": shared_store})
    there = make_hub(models=[entry(standin, "openai")], model="gpt", store={"url": shared_store})
    gate = Gate()
    standin.reply(Text("One, "), Text("two, "), gate, Text("three."))
    first = UIStream(here.client(), ui_body("conv-two-hubs", text_part("count")))
    seen = first.until("text-delta")
    while text_of(seen) != "One, two, ":
        seen += first.until("text-delta")
    with there.client().stream("GET", "/run/api/chat/conv-two-hubs/stream") as elsewhere:
        parts = sse_data(elsewhere)
        read: list[dict[str, Any]] = []
        for part in parts:
            read.append(part)
            if text_of(read) == "One, two, ":
                break
        # All before the model's last words (the stand-in holds them): they came live from the other hub.
        assert [p["delta"] for p in read if p["type"] == "text-delta"] in (["One, two, "], ["One, ", "two, "])
        gate.release()
        read += list(parts)
    assert text_of(read) == "One, two, three."
    assert text_of(seen + first.rest()) == "One, two, three."
    first.close()


def test_a_reader_back_with_its_last_event_id_mid_turn_gets_only_the_rest(
    make_hub: HubFactory, standin: ModelStandIn
) -> None:
    hub = make_hub(models=[entry(standin, "anthropic")], model="gpt")
    gate = Gate()
    standin.reply(Thinking("Counting."), Text("One, "), Text("two, "), gate, Text("three."))
    first = UIStream(hub.client(), ui_body("conv-last-id", text_part("count")))
    had: list[tuple[str, dict[str, Any]]] = []
    for numbered in sse_numbered(first.response):
        had.append(numbered)
        if text_of([p for _, p in had]) == "One, two, ":
            break
    first.close()  # the client goes away inside the turn, with what it had
    last_id = had[-1][0]
    assert last_id.endswith(":10.9")  # inside the turn: ten characters of text, nine of thinking
    with hub.client().stream("GET", "/run/api/chat/conv-last-id/stream", headers={"last-event-id": last_id}) as back:
        gate.release()
        rest = [p for _, p in sse_numbered(back)]
    assert text_of(rest) == "three."  # nothing doubled, nothing lost
    assert not [p for p in rest if p["type"] == "reasoning-delta"]


def test_a_key_variable_that_is_not_set_is_named_and_no_request_is_made(
    make_hub: HubFactory, standin: ModelStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    hub = make_hub(models=[entry(standin, "anthropic", api_key_env="NO_SUCH_KEY_VAR")], model="gpt")
    text = "".join(str(p) for p in items(chat(hub, "hello")))
    assert text == "Model gpt failed: the environment variable NO_SUCH_KEY_VAR is not set."
    assert standin.requests == []


def test_a_model_that_fails_after_its_first_words_keeps_them_and_is_not_retried(
    make_hub: HubFactory, standin: ModelStandIn
) -> None:
    hub = make_hub(models=[entry(standin, "anthropic")], model="gpt")
    standin.reply(Text("Half an "), Fail(529, "Overloaded"))
    stream = chat(hub, "hello")
    text = "".join(str(p) for p in items(stream))
    assert text.startswith("Half an Model gpt failed: ")
    assert len(standin.requests) == 1  # its words had streamed: asked again, it would say them twice
    said = [e["text"] for e in logged(hub, conversation(stream)) if e["type"] == "model-said"]
    assert said == ["Half an "]
