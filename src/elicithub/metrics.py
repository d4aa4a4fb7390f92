"""This hub's metrics, for `GET /metrics` in Prometheus text format: its questions, its runs, its HTTP requests, its
models' requests, the notifications it sent and what its limits refused.

The broker tells `Metrics` of each question a run here starts or stops waiting on, and of each end this process made
(the one transition of a question across the hubs sharing a store): the one place questions are counted, feeding
Prometheus and, when it is on, OpenTelemetry. Labels say a trigger, a mode, an outcome, a route template or a
status: never a user, a conversation, a token or an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from elicithub import telemetry
from elicithub.core.elicitation import Elicitation, Outcome, utcnow

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
UNMATCHED = "unmatched"
"""The route of a request no route took (a 404): one label for every such path, so a scanner adds no series."""
TRIGGERS = frozenset({"mcp_elicitation", "a2a_input_required", "credential_required"})
OTHER = "other"
"""The trigger label of a question whose trigger this hub does not know (a newer hub's, read from a shared store)."""
REQUEST_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
"""Most requests take milliseconds; a chat stream lasts as long as its run, a person's answer included."""
FIRST_TOKEN_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 60.0)
"""A model's first token comes in a fraction of a second to many seconds (a long prompt, a busy provider)."""


class Metrics:
    """One hub's instruments, in a registry of its own (each hub reports what it holds). Off (`enabled` false),
    nothing is recorded here; OpenTelemetry, when on, still hears of every question."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.registry = CollectorRegistry()
        registry = self.registry
        self._pending = Gauge(
            "elicithub_questions_pending",
            "Questions a run of this hub waits on.",
            ["trigger", "mode"],
            registry=registry,
        )
        self._ended = Counter(
            "elicithub_questions_total",
            "Questions ended by this hub (each question counted once across the hubs sharing a store).",
            ["trigger", "mode", "outcome"],
            registry=registry,
        )
        self._waited = Histogram(
            "elicithub_question_wait_seconds",
            "How long a question waited for its end (an answer, a decline, its deadline).",
            ["trigger", "mode", "outcome"],
            buckets=telemetry.WAIT_BUCKETS_S,
            registry=registry,
        )
        self._runs = Gauge(
            "elicithub_runs_active", "Runs of this hub: going, or parked on their questions.", registry=registry
        )
        self._requests = Counter(
            "elicithub_http_requests_total",
            "HTTP requests answered, counted when the response starts.",
            ["route", "status"],
            registry=registry,
        )
        self._took = Histogram(
            "elicithub_http_request_duration_seconds",
            "From a request's arrival to the end of its response's body.",
            ["route"],
            buckets=REQUEST_BUCKETS_S,
            registry=registry,
        )
        self._model_tokens = Counter(
            "elicithub_model_tokens_total",
            "Tokens models read (input) and wrote (output), by the config's model id and the agent.",
            ["model", "agent", "type"],
            registry=registry,
        )
        self._model_requests = Counter(
            "elicithub_model_requests_total",
            "Requests to models: ok, error (the run ends with it), or retried (another try follows).",
            ["model", "outcome"],
            registry=registry,
        )
        self._first_token = Histogram(
            "elicithub_model_first_token_seconds",
            "From a model request's start to its first streamed piece.",
            ["model"],
            buckets=FIRST_TOKEN_BUCKETS_S,
            registry=registry,
        )
        self._notifications = Counter(
            "elicithub_notifications_total",
            "Notifications to people where they are (email, slack, teams): sent; retried (an attempt failed, another "
            "follows); failed (given up); skipped (its question ended first).",
            ["channel", "outcome"],
            registry=registry,
        )
        self._limited = Counter(
            "elicithub_limited_total",
            "Requests refused by a limit: a person's (429) or this hub's max_active_runs (503).",
            ["limit"],
            registry=registry,
        )
        # The process's memory, file descriptors and CPU (Linux; elsewhere none), and the event loop's tasks: what
        # stays flat while a hub serves steadily, and grows when something leaks (bench/soak.py reads them).
        ProcessCollector(registry=registry)
        Gauge(
            "elicithub_event_loop_tasks",
            "Asyncio tasks in the hub's event loop: one or more per request, stream and run being served.",
            registry=registry,
        ).set_function(_tasks)
        # Each request's series, kept at hand: `labels()` checks and locks, a few microseconds a request. Routes are
        # templates and statuses a few, so these stay small.
        self._counted: dict[tuple[str, int], Counter] = {}
        self._timed: dict[str, Histogram] = {}

    def count_runs(self, running: Callable[[], int]) -> None:
        """Read the runs of this hub when scraped."""
        self._runs.set_function(running)

    def pending(self, elicitation: Elicitation, change: int) -> None:
        """A run of this hub waits on the question from now (+1), or no longer (-1: it ended, or the run let go)."""
        if self.enabled:
            self._pending.labels(_trigger(elicitation), elicitation.mode).inc(change)
        telemetry.question_pending(elicitation, change)

    def ended(self, elicitation: Elicitation, outcome: Outcome) -> None:
        """This process ended the question: counted here and nowhere else."""
        waited = max((utcnow() - elicitation.created_at).total_seconds(), 0.0)
        if self.enabled:
            labels = (_trigger(elicitation), elicitation.mode, outcome)
            self._ended.labels(*labels).inc()
            self._waited.labels(*labels).observe(waited)
        telemetry.question_ended(elicitation, outcome, waited)

    def request(self, route: str, status: int) -> None:
        if self.enabled:
            counted = self._counted.get((route, status))
            if counted is None:
                counted = self._counted[route, status] = self._requests.labels(route, str(status))
            counted.inc()

    def took(self, route: str, seconds: float) -> None:
        if self.enabled:
            timed = self._timed.get(route)
            if timed is None:
                timed = self._timed[route] = self._took.labels(route)
            timed.observe(seconds)

    def limited(self, limit: str) -> None:
        """A request was refused by `limit` (requests_per_minute, active_runs, pending_questions, max_active_runs)."""
        if self.enabled:
            self._limited.labels(limit).inc()

    def model_tokens(self, model: str, agent: str, input_tokens: int, output_tokens: int) -> None:
        if self.enabled:
            self._model_tokens.labels(model, agent, "input").inc(input_tokens)
            self._model_tokens.labels(model, agent, "output").inc(output_tokens)

    def model_request(self, model: str, outcome: str) -> None:
        if self.enabled:
            self._model_requests.labels(model, outcome).inc()

    def model_first_token(self, model: str, seconds: float) -> None:
        if self.enabled:
            self._first_token.labels(model).observe(seconds)

    def notification(self, channel: str, outcome: str) -> None:
        """One notification of `channel` went out, or failed, or was dropped (`surfaces.reach.Notified`)."""
        if self.enabled:
            self._notifications.labels(channel, outcome).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _tasks() -> int:
    """The running loop's tasks: /metrics is served on it (0 when read with no loop running, as a test may)."""
    try:
        return len(asyncio.all_tasks())
    except RuntimeError:
        return 0


def _trigger(elicitation: Elicitation) -> str:
    trigger = elicitation.context.get("trigger")
    return trigger if isinstance(trigger, str) and trigger in TRIGGERS else OTHER
