"""SIGTERM as an orchestrator sends it: the hub turns not-ready at once, serves through its drain, ends its streams
and exits 0; a question asked before the drain is answered on another hub, and its run resumes there."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import USERS, McpProcess, sse_numbered
from tests.core_fixtures import PostgresServer, RedisServer
from tests.server.test_scale_out import ServedHub

DRAIN_S = 6
"""Long enough that the checks made during the drain are done well before it ends, even on a busy machine."""


@pytest.fixture(params=["redis", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        with redis_server.client(2) as client:
            client.flushdb()
        return redis_server.url(2)
    postgres_server: PostgresServer = request.getfixturevalue("postgres_server")
    return postgres_server.fresh("drain")


@pytest.fixture
def two_hubs(store_url: str, mrtr_server: McpProcess, tmp_path: Path) -> Iterator[tuple[ServedHub, ServedHub]]:
    config = tmp_path / "hub.yaml"
    config.write_text(
        json.dumps(
            {
                "store": {"url": store_url, "heartbeat_s": 1},
                "secrets": {"key_file": str(tmp_path / "secret.key")},
                "users": USERS,
                "server": {"drain_s": DRAIN_S},
                "mcp_servers": [{"id": "mrtr", "url": mrtr_server.url}],
            }
        )
    )
    a, b = ServedHub(config, tmp_path / "a.log"), ServedHub(config, tmp_path / "b.log")
    a.wait()
    b.wait()
    yield a, b
    for hub in (a, b):
        if hub.process.poll() is None:
            hub.process.kill()
            hub.process.wait(timeout=20)


def readiness(hub: ServedHub) -> httpx.Response:
    return httpx.get(f"{hub.url}/readyz", timeout=10)


def test_a_drained_hub_hands_its_waiting_run_to_the_other(two_hubs: tuple[ServedHub, ServedHub]) -> None:
    a, b = two_hubs
    assert readiness(a).json() == {"ready": True}
    conversation = "conv-drained"
    text = '/call mrtr.provision {"name": "orders"}'
    body = {"id": conversation, "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}]}
    with a.client() as client, client.stream("POST", "/run/api/chat", json=body) as response:
        parts = sse_numbered(response)
        question_id, question = next(p for p in parts if p[1]["type"] == "data-elicitation-request")

        a.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while (ready := readiness(a)).status_code == 200:
            assert time.monotonic() < deadline, "the hub stayed ready after SIGTERM"
        assert ready.status_code == 503
        assert ready.json()["error"]["code"] == "not_ready"
        assert "draining" in ready.json()["error"]["message"]
        # Not ready, but serving: what reaches it during the drain is still answered.
        assert httpx.get(f"{a.url}/healthz", timeout=10).status_code == 200
        assert readiness(b).status_code == 200

        rest = list(parts)  # the drain's end ends the stream, with no finish: the run is not over
    assert all(p["type"] != "finish" for _, p in rest)
    assert a.process.wait(timeout=DRAIN_S + 30) == 0

    answered = b.answer("alice", conversation, question["id"], "accept", {"region": "eu-west-1"})
    assert answered.status_code == 200, answered.text
    path = f"/run/api/chat/{conversation}/stream"
    with b.client() as other, other.stream("GET", path, headers={"last-event-id": question_id}) as back:
        assert back.status_code == 200
        replayed = [p for _, p in sse_numbered(back)]
    assert (
        "".join(p.get("delta", "") for p in replayed if p["type"] == "text-delta") == "Provisioned orders in eu-west-1."
    )
    assert replayed[-1]["type"] == "finish"
