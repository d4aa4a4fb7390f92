"""OpenTelemetry (the `otel` extra): spans for inbound requests, runs, tool calls, questions and downstream calls;
question metrics (fed by the hub's metrics, elicithub/metrics.py, which count each question in one place).

Off unless the standard `OTEL_*` environment asks for it at startup (`configure`), or a test `install`s providers.
Off, every hook is a module-level check returning a shared no-op: no span, no allocation, no opentelemetry import.
Spans and metrics carry ids, names and outcomes only: never a token, a code, a URL or what a person answered.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from importlib.metadata import entry_points, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

    from elicithub.core.elicitation import Elicitation, Outcome
    from elicithub.core.runs import RunRecord
    from elicithub.core.waiting import Resolution

log = logging.getLogger(__name__)

EXTRA = "pip install 'elicithub[otel]'"
SERVICE_NAME = "elicithub"
ASKING = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
"""Any of these set (and `OTEL_SDK_DISABLED` not "true") turns telemetry on."""
WAIT_BUCKETS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
"""A person answers in seconds to an hour, not in the milliseconds the SDK's default buckets are made for."""
METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"})
"""The methods a server span is named by; any other is "HTTP" (a span name is never what a client made up)."""

Ended = Callable[["Resolution"], None]
"""Hears each question of a wait end, as it ends."""


class Noted:
    """What a block tells its span before it ends; nothing at all when telemetry is off."""

    __slots__ = ("_span",)

    def __init__(self, span: Span | None) -> None:
        self._span = span

    def note(self, key: str, value: str | bool | int, *, failed: bool = False) -> None:
        if self._span is None:
            return
        self._span.set_attribute(key, value)
        if failed:
            from opentelemetry.trace import StatusCode

            self._span.set_status(StatusCode.ERROR)


class Serving:
    """What an inbound request tells its server span once answered; nothing at all when telemetry is off."""

    __slots__ = ("_method", "_span")

    def __init__(self, span: Span | None, method: str = "") -> None:
        self._span = span
        self._method = method

    def answered(self, route: str, status: int | None) -> None:
        """Name the span by its route template (never the path, which carries ids) and note the status."""
        if self._span is None:
            return
        self._span.update_name(f"{self._method} {route}")
        self._span.set_attribute("http.route", route)
        if status is None:  # its client went away before an answer
            return
        self._span.set_attribute("http.response.status_code", status)
        if status >= 500:
            from opentelemetry.trace import StatusCode

            self._span.set_status(StatusCode.ERROR)


_IDLE: AbstractContextManager[Noted] = nullcontext(Noted(None))
_NOT_WATCHING: AbstractContextManager[Ended | None] = nullcontext(None)
_NOT_SERVING: AbstractContextManager[Serving] = nullcontext(Serving(None))


class _Question:
    __slots__ = ("created", "span")

    def __init__(self, span: Span, created: float) -> None:
        self.span = span
        self.created = created


class _Telemetry:
    """The tracer and instruments, once telemetry is on; `shutdown` flushes and closes providers made for it."""

    def __init__(
        self,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider,
        shutdown: Callable[[], None] = lambda: None,
    ) -> None:
        from opentelemetry import propagate, trace

        self.shutdown = shutdown
        self._trace = trace
        self._inject = propagate.inject
        self._extract = propagate.extract
        self.tracer = tracer_provider.get_tracer("elicithub", version("elicithub"))
        meter = meter_provider.get_meter("elicithub", version("elicithub"))
        self.pending = meter.create_up_down_counter(
            "elicithub.elicitations.pending", unit="{elicitation}", description="Questions waiting for a person."
        )
        self.outcomes = meter.create_counter(
            "elicithub.elicitations.outcomes", unit="{elicitation}", description="Questions ended, by outcome."
        )
        self.wait = meter.create_histogram(
            "elicithub.elicitation.wait.duration",
            unit="s",
            description="How long a question waited for its end (an answer, a decline, its deadline).",
            explicit_bucket_boundaries_advisory=WAIT_BUCKETS_S,
        )

    @contextmanager
    def span(self, name: str, attributes: Mapping[str, str | bool | int]) -> Iterator[Noted]:
        span = self.tracer.start_span(name, attributes=attributes)
        with self._trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            try:
                yield Noted(span)
            except Exception as exc:
                # Only the exception's type: its message may quote what a server or a person sent.
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(self._trace.StatusCode.ERROR)
                raise
            except BaseException:  # cancelled (a shutdown): the run stays on record, to be resumed
                span.set_attribute("interrupted", True)
                raise

    @contextmanager
    def serving(self, method: str, headers: Iterable[tuple[bytes, bytes]]) -> Iterator[Serving]:
        # The propagators (`OTEL_PROPAGATORS`) read only their own headers; no header is recorded.
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
        known = method if method in METHODS else "HTTP"
        span = self.tracer.start_span(
            known,
            context=self._extract(carrier),
            kind=self._trace.SpanKind.SERVER,
            attributes={"http.request.method": known if known != "HTTP" else "_OTHER"},
        )
        with self._trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            try:
                yield Serving(span, known)
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__qualname__)  # not its message: it may quote the body
                raise

    @contextmanager
    def questions(self, elicitations: Sequence[Elicitation]) -> Iterator[Ended]:
        waiting = {e.id: self._opened(e) for e in elicitations}

        def ended(resolution: Resolution) -> None:
            question = waiting.pop(resolution.elicitation_id, None)
            if question is not None:
                self._ended(question, resolution.outcome)

        try:
            yield ended
        finally:
            for question in waiting.values():  # the wait was cut short (a shutdown): no outcome heard here
                self._ended(question, None)

    def _opened(self, elicitation: Elicitation) -> _Question:
        attributes = {**_labels(elicitation), "elicitation.id": elicitation.id, "run.id": elicitation.run_id}
        if "toolName" in elicitation.context:
            attributes["tool_name"] = str(elicitation.context["toolName"])
        span = self.tracer.start_span("elicitation", attributes=attributes)
        return _Question(span, elicitation.created_at.timestamp())

    def _ended(self, question: _Question, outcome: str | None) -> None:
        question.span.set_attribute("wait_seconds", max(time.time() - question.created, 0.0))
        if outcome is None:
            question.span.set_attribute("interrupted", True)
        else:
            question.span.set_attribute("outcome", outcome)
        question.span.end()


def _labels(elicitation: Elicitation) -> dict[str, str]:
    context = elicitation.context
    return {
        "trigger": str(context.get("trigger", "")),
        "mode": elicitation.mode,
        "server_id": str(context.get("serverId") or context.get("agentId") or ""),
    }


_on: _Telemetry | None = None


def enabled() -> bool:
    return _on is not None


def run(record: RunRecord, resumed: bool) -> AbstractContextManager[Noted]:
    """A span for a run (a delegated one is a child of its parent's tool call); note its outcome."""
    if _on is None:
        return _IDLE
    attributes: dict[str, str | bool] = {
        "run.id": record.run_id,
        "conversation.id": record.conversation_id,
        "agent": record.agent,
        "run.resumed": resumed,
    }
    if record.parent_run_id is not None:
        attributes["run.parent_id"] = record.parent_run_id
    return _on.span("run", attributes)


def tool_call(name: str) -> AbstractContextManager[Noted]:
    """A span for one tool call of a run (`PREFIX.tool`); downstream requests made for it are its children."""
    if _on is None:
        return _IDLE
    prefix, _, tool = name.partition(".")
    return _on.span("tool_call", {"tool_name": tool, "server_id": prefix})


def model_request(provider: str, model: str) -> AbstractContextManager[Noted]:
    """A span for one request to a model, with the GenAI semantic conventions' attributes; note its usage with
    `gen_ai.usage.input_tokens` and `gen_ai.usage.output_tokens`."""
    if _on is None:
        return _IDLE
    name = "openai" if provider == "openai-compatible" else provider
    attributes: dict[str, str | bool | int] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "gcp.gemini" if name == "google" else name,
        "gen_ai.request.model": model,
    }
    return _on.span(f"chat {model}", attributes)


def questions(elicitations: Sequence[Elicitation]) -> AbstractContextManager[Ended | None]:
    """A span per question from now until it ends; the block gets what to tell of each end (None when off)."""
    if _on is None or not elicitations:
        return _NOT_WATCHING
    return _on.questions(elicitations)


def question_pending(elicitation: Elicitation, change: int) -> None:
    """The hub's metrics say a run of it waits on a question from now (+1), or no longer (-1)."""
    if _on is not None:
        _on.pending.add(change, _labels(elicitation))


def question_ended(elicitation: Elicitation, outcome: Outcome, waited: float) -> None:
    """The hub's metrics say it ended a question (each end is told by one hub only)."""
    if _on is not None:
        labels = {**_labels(elicitation), "outcome": outcome}
        _on.outcomes.add(1, labels)
        _on.wait.record(waited, labels)


def serving(method: str, headers: Iterable[tuple[bytes, bytes]]) -> AbstractContextManager[Serving]:
    """A server span for an inbound request, joining the caller's trace (its W3C `traceparent`): what the request
    starts (a run, its tool calls and questions) is its child. Named by method, then by route template."""
    if _on is None:
        return _NOT_SERVING
    return _on.serving(method, headers)


def current_trace_id() -> str | None:
    """The trace the current work belongs to, as 32 hex digits (for log lines); None when off or outside one."""
    if _on is None:
        return None
    context = _on._trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def http_hooks() -> dict[str, list[Callable[[Any], Any]]]:
    """Event hooks for a downstream `httpx`/`httpx2` client: the W3C trace context on each request. None when
    off at the client's creation, so a hub started without telemetry pays nothing per request."""
    return {"request": [_propagate]} if _on is not None else {}


async def _propagate(request: Any) -> None:
    if _on is not None:
        _on._inject(request.headers)


def install(tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None) -> None:
    """Turn telemetry on with these providers (the global ones for any not given): how tests use in-memory
    exporters without the process-wide providers, which can be set only once."""
    from opentelemetry import metrics, trace

    _install(_Telemetry(tracer_provider or trace.get_tracer_provider(), meter_provider or metrics.get_meter_provider()))


def uninstall() -> None:
    """Turn telemetry off (flushing and closing the providers that `configure` made)."""
    global _on
    telemetry, _on = _on, None
    if telemetry is not None:
        telemetry.shutdown()


def _install(telemetry: _Telemetry) -> None:
    global _on
    uninstall()
    _on = telemetry


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the standard environment asks for telemetry."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ASKING)


def configure() -> bool:
    """At startup: turn telemetry on if the `OTEL_*` environment asks for it; True when on.

    Exporters are named by `OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER` ("otlp" when unset, "none" for none),
    as the SDK's own entry points name them; "otlp" is OTLP over HTTP unless `OTEL_EXPORTER_OTLP_PROTOCOL` says
    grpc. The providers made here are the hub's own, not the process's global ones: the MCP and A2A SDKs' spans
    (which may record exception messages quoting what was sent) stay out. A process that already set global SDK
    providers (`opentelemetry-instrument`, an app embedding the hub) has the hub use those instead.
    """
    if _on is not None:
        return True
    if not wanted(os.environ):
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_* asks for OpenTelemetry, but it is not installed (%s): running without it", EXTRA)
        return False
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        install()
        log.info("OpenTelemetry on, with the process's providers")
        return True
    # The service is "elicithub" unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name it.
    resource = Resource.create({"service.name": SERVICE_NAME, **OTELResourceDetector().detect().attributes})
    tracer_provider = TracerProvider(resource=resource)
    for span_exporter in _exporters("traces"):
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    readers: list[MetricReader] = [
        exporter if isinstance(exporter, MetricReader) else PeriodicExportingMetricReader(exporter)
        for exporter in _exporters("metrics")
    ]
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)

    def shutdown() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    _install(_Telemetry(tracer_provider, meter_provider, shutdown))
    log.info("OpenTelemetry on: traces to %s, metrics to %s", _names("traces"), _names("metrics"))
    return True


def _names(signal: str) -> list[str]:
    names = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp").strip() or "otlp"
    return [] if names.lower() == "none" else [n.strip() for n in names.split(",") if n.strip()]


def _exporters(signal: str) -> list[Any]:
    """The exporters `OTEL_{SIGNAL}_EXPORTER` names, made from the entry points that packages register for them."""
    protocol = (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    found = []
    for name in _names(signal):
        if name == "otlp":
            name = "otlp_proto_grpc" if protocol.strip() == "grpc" else "otlp_proto_http"
        points = entry_points(group=f"opentelemetry_{signal}_exporter", name=name)
        if not points:
            log.warning("no OpenTelemetry %s exporter named %r is installed; skipping it", signal, name)
            continue
        found.append(next(iter(points)).load()())
    return found
