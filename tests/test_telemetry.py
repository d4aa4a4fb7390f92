"""OpenTelemetry end to end: a real hub, a real MCP server that asks, the SDK's in-memory exporters."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from elicithub import telemetry
from elicithub.core.runs import RunRecord
from tests.auth.test_credential_flow import converse
from tests.conftest import HubFactory, RunningHub, served
from tests.models.script import Text
from tests.models.standins import ModelStandIn
from tests.server.test_chat_openai import chat, conversation, items
from tests.triggers.test_a2a_agents import AgentProcess, answer_with

REGION = "eu-west-1"
"""The answer: it must show nowhere in telemetry."""


class Recorder:
    """ASGI middleware: the headers of every request the wrapped app gets."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.headers: list[dict[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self.app(scope, receive, send)

    def traceparents(self) -> list[str]:
        return [h["traceparent"] for h in self.headers if "traceparent" in h]


@pytest.fixture(scope="module")
def downstream() -> Iterator[tuple[str, Recorder]]:
    """tests/servers/legacy_server.py (a 2025-11-25 server asking mid-call), served here behind a Recorder."""
    from tests.servers.legacy_server import server

    recorder = Recorder(server.streamable_http_app())
    with served(recorder) as server:
        yield f"{server.url}/mcp", recorder


class Otel:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])
        self.tracer_provider = tracer_provider

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                found.extend(p for m in scope.metrics if m.name == metric for p in m.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    otel = Otel()
    telemetry.install(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    yield otel
    telemetry.uninstall()


def legacy_hub(make_hub: HubFactory, url: str, **overrides: Any) -> RunningHub:
    return make_hub(mcp_servers=[{"id": "legacy", "url": url, "protocol": "legacy"}], **overrides)


def pending(otel: Otel) -> int:
    return sum(p.value for p in otel.points("elicithub.elicitations.pending"))


def ask(hub: RunningHub, otel: Otel | None, action: str, content: Any = None) -> dict[str, Any]:
    """Call legacy.provision, see its question pending, answer it; the question's events."""
    stream = chat(hub, '/call legacy.provision {"name": "orders"}')
    events = []
    for item in items(stream):
        if isinstance(item, dict):
            events.append(item)
            if item["type"] == "elicitation-request":
                if otel is not None:
                    deadline = time.monotonic() + 5
                    while pending(otel) != 1 and time.monotonic() < deadline:
                        time.sleep(0.02)
                    assert pending(otel) == 1
                if action != "wait":
                    time.sleep(0.05)  # a person takes a moment
                    reply = hub.answer("alice", conversation(stream), item["elicitationId"], action, content)
                    assert reply.status_code == 200, reply.text
    return events[0]


def runs_finished(otel: Otel, count: int) -> list[ReadableSpan]:
    """The run spans, once `count` have ended (a run's span ends just after its stream's last event)."""
    deadline = time.monotonic() + 5
    while len(otel.named("run")) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return otel.named("run")


def every_attribute(otel: Otel) -> list[str]:
    return [json.dumps(dict(s.attributes or {})) for s in otel.spans.get_finished_spans()]


def test_a_paused_call_is_traced_run_tool_call_question_and_downstream(
    otel: Otel, make_hub: HubFactory, downstream: tuple[str, Recorder]
) -> None:
    url, recorder = downstream
    recorder.headers.clear()
    hub = legacy_hub(make_hub, url)
    request = ask(hub, otel, "accept", {"region": REGION})

    runs_finished(otel, 1)
    [run] = otel.named("run")
    [call] = otel.named("tool_call")
    [question] = otel.named("elicitation")
    [chat_request] = otel.named("POST /run/v1/chat/completions")
    assert chat_request.parent is None  # the client sent no trace context: the request starts the trace
    assert run.parent is not None and run.parent.span_id == chat_request.context.span_id
    assert call.parent is not None and call.parent.span_id == run.context.span_id
    assert question.parent is not None and question.parent.span_id == call.context.span_id
    assert {s.context.trace_id for s in (run, call, question)} == {run.context.trace_id}

    assert run.attributes is not None and run.attributes["outcome"] == "stop"
    assert run.attributes["agent"] == "assistant"
    assert str(run.attributes["run.id"]).startswith("run_")
    assert call.attributes == {"tool_name": "provision", "server_id": "legacy", "is_error": False}
    attributes = dict(question.attributes or {})
    waited = attributes.pop("wait_seconds")
    assert isinstance(waited, float) and waited > 0
    assert attributes == {
        "elicitation.id": request["elicitationId"],
        "run.id": run.attributes["run.id"],
        "trigger": "mcp_elicitation",
        "mode": "form",
        "server_id": "legacy",
        "tool_name": "provision",
        "outcome": "accepted",
    }
    assert not any(REGION in a or "secret" in a for a in every_attribute(otel))

    # Every request the hub sent downstream for the call carries the call's trace context.
    traceparents = recorder.traceparents()
    assert traceparents
    for traceparent in traceparents:
        _, trace_id, parent_id, _ = traceparent.split("-")
        assert int(trace_id, 16) == run.context.trace_id
        assert int(parent_id, 16) in (run.context.span_id, call.context.span_id)
    assert any(int(t.split("-")[2], 16) == call.context.span_id for t in traceparents)

    assert pending(otel) == 0
    [outcome] = otel.points("elicithub.elicitations.outcomes")
    assert (outcome.value, outcome.attributes["outcome"]) == (1, "accepted")
    [wait] = otel.points("elicithub.elicitation.wait.duration")
    assert wait.count == 1 and wait.sum > 0


def test_a_request_joins_the_callers_trace_and_what_it_starts_is_its_child(otel: Otel, hub: RunningHub) -> None:
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    traceparent = {"traceparent": f"00-{caller_trace}-{caller_span}-01"}
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
    with hub.client() as client:
        with client.stream("POST", "/run/v1/chat/completions", json=body, headers=traceparent) as stream:
            assert stream.status_code == 200
            conversation_id = stream.headers["x-conversation-id"]
            assert stream.read()
        assert client.get(f"/run/api/conversations/{conversation_id}", headers=traceparent).status_code == 200

    [run] = runs_finished(otel, 1)
    [chat_request] = otel.named("POST /run/v1/chat/completions")
    assert chat_request.kind is SpanKind.SERVER
    assert format(chat_request.context.trace_id, "032x") == caller_trace
    assert chat_request.parent is not None and format(chat_request.parent.span_id, "016x") == caller_span
    assert run.parent is not None and run.parent.span_id == chat_request.context.span_id
    assert dict(chat_request.attributes or {}) == {
        "http.request.method": "POST",
        "http.route": "/run/v1/chat/completions",
        "http.response.status_code": 200,
    }
    # A FastAPI route is named by its template too, never by its path (which carries the conversation id).
    [read] = otel.named("GET /run/api/conversations/{conversation_id}")
    assert read.kind is SpanKind.SERVER and format(read.context.trace_id, "032x") == caller_trace
    assert not [s for s in otel.spans.get_finished_spans() if conversation_id in s.name]
    served = json.dumps([dict(s.attributes or {}) for s in (chat_request, read)])
    assert conversation_id not in served and "alice-secret" not in served


def test_each_call_carries_its_own_runs_trace_downstream(
    otel: Otel, make_hub: HubFactory, downstream: tuple[str, Recorder]
) -> None:
    url, recorder = downstream
    recorder.headers.clear()
    hub = legacy_hub(make_hub, url)
    ask(hub, otel, "accept", {"region": REGION})
    ask(hub, otel, "accept", {"region": REGION})
    runs = runs_finished(otel, 2)
    calls = {s.context.span_id for s in otel.named("tool_call")}
    assert len(runs) == 2 and len(calls) == 2
    sent = [t.split("-") for t in recorder.traceparents()]
    assert {int(trace_id, 16) for _, trace_id, _, _ in sent} == {r.context.trace_id for r in runs}
    assert {int(parent_id, 16) for _, _, parent_id, _ in sent} >= calls


@pytest.mark.parametrize(("action", "outcome", "timeout_s"), [("decline", "declined", 600), ("wait", "expired", 1)])
def test_a_question_that_is_not_answered_records_its_outcome(
    otel: Otel,
    make_hub: HubFactory,
    downstream: tuple[str, Recorder],
    action: str,
    outcome: str,
    timeout_s: float,
) -> None:
    hub = legacy_hub(make_hub, downstream[0], elicitation={"timeout_s": timeout_s})
    ask(hub, otel, action)
    runs_finished(otel, 1)
    [question] = otel.named("elicitation")
    assert question.attributes is not None and question.attributes["outcome"] == outcome
    [call] = otel.named("tool_call")
    assert call.attributes is not None and call.attributes["is_error"] is True
    assert pending(otel) == 0
    [counted] = otel.points("elicithub.elicitations.outcomes")
    assert (counted.value, counted.attributes["outcome"]) == (1, outcome)


def test_off_nothing_is_traced_and_no_trace_context_goes_downstream(
    make_hub: HubFactory, downstream: tuple[str, Recorder]
) -> None:
    url, recorder = downstream
    recorder.headers.clear()
    assert not telemetry.enabled()
    ask(legacy_hub(make_hub, url), None, "accept", {"region": REGION})
    assert recorder.headers and not recorder.traceparents()
    assert telemetry.http_hooks() == {}
    record = RunRecord("run_1", "c", "alice", True, [])
    with telemetry.run(record, False) as run, telemetry.tool_call("legacy.provision") as call:
        assert run is call  # one shared no-op
    assert telemetry.serving("POST", []) is telemetry.serving("GET", [])
    with telemetry.questions([]) as ended:
        assert ended is None


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [*telemetry.ASKING, "OTEL_SDK_DISABLED"]:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_without_otel_variables_telemetry_stays_off(clean_env: pytest.MonkeyPatch) -> None:
    assert telemetry.configure() is False
    assert not telemetry.enabled()


def test_otel_sdk_disabled_wins(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "console")
    clean_env.setenv("OTEL_SDK_DISABLED", "true")
    assert telemetry.configure() is False


def test_asked_for_without_the_extra_warns_once_and_runs_without(
    clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clean_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    clean_env.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if the SDK were not installed
    with caplog.at_level(logging.WARNING, logger="elicithub.telemetry"):
        assert telemetry.configure() is False
    assert not telemetry.enabled()
    [warning] = caplog.records
    assert "elicithub[otel]" in warning.getMessage()


SCRIPT = """
from elicithub import telemetry
assert telemetry.configure()
with telemetry.tool_call("legacy.provision") as span:
    span.note("is_error", False)
telemetry.uninstall()
"""


@pytest.mark.parametrize(("extra", "service"), [({}, "elicithub"), ({"OTEL_SERVICE_NAME": "hub-eu"}, "hub-eu")])
def test_otel_traces_exporter_console_turns_it_on(extra: dict[str, str], service: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none", **extra})
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    span = json.loads(done.stdout)
    assert span["name"] == "tool_call"
    assert span["attributes"] == {"tool_name": "provision", "server_id": "legacy", "is_error": False}
    assert span["resource"]["attributes"]["service.name"] == service


def test_a2a_requests_carry_the_runs_trace_context(otel: Otel, make_hub: HubFactory) -> None:
    agent = AgentProcess()
    try:
        hub = make_hub(a2a_agents=[{"id": "travel", "url": agent.url}])
        text, _ = converse(
            hub,
            "/call travel.send_message " + json.dumps({"message": "plain trip"}),
            answer_with(hub, "accept", {"answer": "Oslo"}),
        )
        assert text.endswith("Booked a trip from Oslo.")
        traceparents: list[str] = httpx.get(f"{agent.url}/debug/traceparents").json()
    finally:
        agent.kill()
    [run] = otel.named("run")
    [call] = otel.named("tool_call")
    [question] = otel.named("elicitation")
    assert question.parent is not None and question.parent.span_id == call.context.span_id
    assert question.attributes is not None
    assert (question.attributes["trigger"], question.attributes["server_id"]) == ("a2a_input_required", "travel")
    assert question.attributes["outcome"] == "accepted"
    assert traceparents
    assert {int(t.split("-")[1], 16) for t in traceparents} == {run.context.trace_id}
    assert not any("Oslo" in a for a in every_attribute(otel))


PROCESS_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)

from elicithub import telemetry
assert telemetry.configure()
with telemetry.tool_call("legacy.provision"):
    pass
print([s.name for s in spans.get_finished_spans()])
"""


def test_a_process_that_set_its_own_providers_has_the_hub_use_them() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"})
    done = subprocess.run([sys.executable, "-c", PROCESS_PROVIDER], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['tool_call']"  # in the process's exporter, and not also on the console


def test_a_model_request_is_a_span_with_the_genai_attributes_and_no_key(
    otel: Otel, make_hub: HubFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_KEY", "sk-span-secret")
    with ModelStandIn() as standin:
        model = {"id": "claude", "provider": "anthropic", "model": "claude-standin", "api_key_env": "STANDIN_KEY"}
        hub = make_hub(models=[{**model, "base_url": standin.anthropic_base_url}], model="claude")
        standin.reply(Text("Hi."), input_tokens=42, output_tokens=3)
        assert "".join(str(i) for i in items(chat(hub, "hello"))) == "Hi."
    [span] = otel.named("chat claude-standin")  # ended before the stream's last event: the turn's end follows it
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-standin",
        "gen_ai.usage.input_tokens": 42,
        "gen_ai.usage.output_tokens": 3,
    }
    [run] = runs_finished(otel, 1)
    assert span.parent is not None and span.parent.span_id == run.context.span_id
    assert not [a for a in every_attribute(otel) if "sk-span-secret" in a]
