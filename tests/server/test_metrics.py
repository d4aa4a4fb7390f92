"""`GET /metrics` of served hubs, read with prometheus_client's own parser: questions pending, ended and waited on,
runs, HTTP requests by route template; no label names a user, a token, a conversation or an answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.conftest import USERS, HubAddress, HubFactory
from tests.server.test_chat_openai import chat, conversation, items

QUESTION = {"trigger": "mcp_elicitation", "mode": "form"}
ANSWER = {"region": "eu-west-1"}


def scrape(hub: HubAddress) -> list[Sample]:
    response = httpx.get(f"{hub.url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return [sample for family in text_string_to_metric_families(response.text) for sample in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of the samples `name` whose labels include `labels` (0 when there is none)."""
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


def label_values(samples: list[Sample]) -> set[str]:
    return {v for s in samples for v in s.labels.values()}


def until_asked(stream: Iterator[str | dict[str, Any]]) -> dict[str, Any]:
    for item in stream:
        if isinstance(item, dict) and item["type"] == "elicitation-request":
            return item
    raise AssertionError("the stream ended without a question")


@pytest.mark.parametrize("server", ["legacy", "mrtr"])  # a run waiting in its task, and one parked
def test_a_question_is_pending_until_answered_then_counted_once(make_hub: HubFactory, server: str) -> None:
    hub = make_hub()
    stream = chat(hub, f'/call {server}.provision {{"name": "orders"}}')
    events = items(stream)
    question = until_asked(events)

    asked = scrape(hub)
    assert value(asked, "elicithub_questions_pending", **QUESTION) == 1
    assert value(asked, "elicithub_runs_active") == 1
    assert value(asked, "elicithub_questions_total") == 0

    answered = hub.answer("alice", conversation(stream), question["elicitationId"], "accept", ANSWER)
    assert answered.status_code == 200, answered.text
    after = scrape(hub)
    assert value(after, "elicithub_questions_pending", **QUESTION) == 0
    assert value(after, "elicithub_questions_total", **QUESTION, outcome="accepted") == 1
    assert value(after, "elicithub_questions_total") == 1
    assert value(after, "elicithub_question_wait_seconds_count", **QUESTION, outcome="accepted") == 1
    answers = {"route": "/run/api/elicitation-responses", "status": "200"}
    assert value(after, "elicithub_http_requests_total", **answers) == 1
    assert value(after, "elicithub_http_requests_total", route="/run/v1/chat/completions", status="200") == 1
    assert value(after, "elicithub_http_request_duration_seconds_count", route="/run/api/elicitation-responses") == 1

    assert "".join(i for i in events if isinstance(i, str)) == "Provisioned orders in eu-west-1."
    shown = label_values(after)
    secrets = {"alice", *(u["token"] for u in USERS), conversation(stream), question["elicitationId"], "eu-west-1"}
    assert not [v for v in shown for secret in secrets if secret in v]


def test_requests_are_labelled_by_route_template_and_unknown_paths_share_one_label(make_hub: HubFactory) -> None:
    hub = make_hub()
    with hub.client() as client:
        assert client.get("/run/api/conversations/conv_abc123def456/stream").status_code == 404
        assert client.get("/run/api/conversations/conv_abc123def456/stream").status_code == 404
        assert client.get("/no/such/page-7f3e").status_code == 404
        assert client.get("/another/page-9c1d?token=alice-secret").status_code == 404
        assert client.get("/.well-known/agent-card.json").status_code == 200  # a route FastAPI does not name
        assert client.get("/static/no-such-file.js").status_code == 404
    samples = scrape(hub)

    reattach = {"route": "/run/api/conversations/{conversation_id}/stream", "status": "404"}
    assert value(samples, "elicithub_http_requests_total", **reattach) == 2
    assert value(samples, "elicithub_http_requests_total", route="unmatched", status="404") == 2
    assert value(samples, "elicithub_http_requests_total", route="/.well-known/agent-card.json", status="200") == 1
    assert value(samples, "elicithub_http_requests_total", route="/static/{path}", status="404") == 1
    assert value(samples, "elicithub_http_request_duration_seconds_count", route=reattach["route"]) == 2
    shown = label_values(samples)
    assert not [v for v in shown if "abc123" in v or "page-" in v or "secret" in v or "no-such" in v]


def test_the_process_memory_descriptors_and_event_loop_tasks_are_shown_and_open_streams_count(
    make_hub: HubFactory,
) -> None:
    hub = make_hub()
    idle = scrape(hub)
    assert value(idle, "process_resident_memory_bytes") > 0
    assert value(idle, "process_open_fds") > 0
    assert value(idle, "elicithub_event_loop_tasks") >= 1  # the scrape's own request

    # Three runs waiting on their questions, their streams open: each stream is served by tasks of the loop.
    streams = [chat(hub, f'/call mrtr.provision {{"name": "db{i}"}}') for i in range(3)]
    waiting = [(stream, until_asked(items(stream))) for stream in streams]
    assert value(scrape(hub), "elicithub_event_loop_tasks") >= value(idle, "elicithub_event_loop_tasks") + 3

    for i, (stream, question) in enumerate(waiting):
        answered = hub.answer("alice", conversation(stream), question["elicitationId"], "accept", ANSWER)
        assert answered.status_code == 200, answered.text
        assert "".join(t for t in items(stream) if isinstance(t, str)) == f"Provisioned db{i} in eu-west-1."


def test_metrics_turned_off_is_404_and_the_hub_serves_on(make_hub: HubFactory) -> None:
    hub = make_hub(metrics={"enabled": False})
    assert httpx.get(f"{hub.url}/metrics").status_code == 404
    assert httpx.get(f"{hub.url}/healthz").status_code == 200


@pytest.mark.parametrize("server", ["legacy", "mrtr"])
def test_a_question_asked_on_a_and_answered_on_b_is_pending_nowhere_and_counted_once(
    make_hub: HubFactory, redis_url: str, server: str
) -> None:
    a = make_hub(store={"url": redis_url})
    b = make_hub(store={"url": redis_url})
    stream = chat(a, f'/call {server}.provision {{"name": "orders"}}')
    events = items(stream)
    question = until_asked(events)
    assert value(scrape(a), "elicithub_questions_pending", **QUESTION) == 1
    assert value(scrape(b), "elicithub_questions_pending", **QUESTION) == 0

    answered = b.answer("alice", conversation(stream), question["elicitationId"], "accept", ANSWER)
    assert answered.status_code == 200, answered.text
    # The run on A went on once A heard of the end: the rest of its stream.
    assert "".join(i for i in events if isinstance(i, str)) == "Provisioned orders in eu-west-1."

    on_a, on_b = scrape(a), scrape(b)
    assert value(on_a, "elicithub_questions_pending", **QUESTION) == 0
    assert value(on_b, "elicithub_questions_pending", **QUESTION) == 0
    # Counted where the end was made, and nowhere else.
    assert value(on_b, "elicithub_questions_total", **QUESTION, outcome="accepted") == 1
    assert value(on_a, "elicithub_questions_total") == 0
    waits = "elicithub_question_wait_seconds_count"
    assert (value(on_a, waits), value(on_b, waits)) == (0, 1)
