"""The inbox across two `elicithub serve` processes sharing a store: an approval asked on one hub reaches an inbox
stream on the other, its end (answered on either hub, expired) reaches everyone who had it, an escalation reaches
those it escalates to, and a stream resumes on either hub after `Last-Event-ID`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.core_fixtures import PostgresServer, RedisServer
from tests.server.test_scale_out import ServedHub
from tests.surfaces.pages.inboxes import KEEPALIVE_S, InboxStream, listed
from tests.triggers.approving import PEOPLE, RESTART, USERS, OpsServer, Requester, answer, policy, tool_output

DB = 3  # a database of its own on the session's redis-server


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


def store_url(request: pytest.FixtureRequest, kind: str) -> str:
    if kind == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        with redis_server.client(DB) as client:
            client.flushdb()
        return redis_server.url(DB)
    postgres_server: PostgresServer = request.getfixturevalue("postgres_server")
    return postgres_server.fresh("inbox_scale_out")


def two_hubs(url: str, ops: OpsServer, tmp_path: Path, **changes: Any) -> tuple[ServedHub, ServedHub]:
    """Two hubs on one store; `ops.*` needs approval by the group ops (bob, carol), with `changes` to the policy."""
    config = tmp_path / "hub.yaml"
    config.write_text(
        json.dumps(
            {
                "store": {"url": url, "heartbeat_s": 0.5},
                "secrets": {"key_file": str(tmp_path / "secret.key")},
                "users": USERS,
                "groups": {"ops": ["bob", "carol"]},
                "mcp_servers": [{"id": "ops", "url": ops.url}],
                "approvals": [policy(**changes)],
                "streams": {"keepalive_s": KEEPALIVE_S},
            }
        )
    )
    a, b = ServedHub(config, tmp_path / "a.log"), ServedHub(config, tmp_path / "b.log")
    try:
        a.wait()
        b.wait()
    except BaseException:
        a.stop()
        b.stop()
        raise
    return a, b


@pytest.fixture(params=["redis", "postgres"])
def hubs(request: pytest.FixtureRequest, ops: OpsServer, tmp_path: Path) -> Iterator[tuple[ServedHub, ServedHub]]:
    a, b = two_hubs(store_url(request, request.param), ops, tmp_path)
    yield a, b
    a.stop()
    b.stop()


def test_an_approval_asked_on_one_hub_comes_and_goes_on_a_stream_of_the_other(
    hubs: tuple[ServedHub, ServedHub], ops: OpsServer
) -> None:
    a, b = hubs
    with InboxStream(b.url, PEOPLE["carol"]) as carol, InboxStream(a.url, PEOPLE["bob"]) as bob:
        assert carol.started() == [] and bob.started() == []
        with Requester(a.url, "alice", "conv-across", RESTART) as asked:
            eid = asked.until("data-approval-pending")["id"]
            added = carol.until("inbox-added")
            assert added == {"type": "inbox-added", **listed(b.url, PEOPLE["carol"])[0]}
            assert added["elicitationId"] == eid and added["context"]["requester"] == "alice"
            assert bob.until("inbox-added")["elicitationId"] == eid
            # Carol answers on B; bob's stream on A and hers on B both lose it.
            assert answer(b.url, "carol", eid, content={"approve": True}).status_code == 200
            ended = {"type": "inbox-removed", "elicitationId": eid, "outcome": "accepted", "answeredBy": "carol"}
            assert carol.until("inbox-removed") == ended
            assert bob.until("inbox-removed") == ended
            assert tool_output(asked.rest()) == ("Restarted orders with 2 replicas.", False)


def test_a_stream_resumes_on_the_other_hub_after_last_event_id(
    hubs: tuple[ServedHub, ServedHub], ops: OpsServer
) -> None:
    a, b = hubs
    with Requester(a.url, "alice", "conv-first", RESTART) as first:
        one = first.until("data-approval-pending")["id"]
        with InboxStream(b.url, PEOPLE["carol"]) as carol:
            assert [e["elicitationId"] for e in carol.started()] == [one]
            resume_at = carol.last_id
        # While carol is away: the first is answered on A, a second is asked on B.
        assert answer(a.url, "bob", one, "decline").status_code == 200
        first.rest()
    with Requester(b.url, "alice", "conv-second", RESTART) as second:
        two = second.until("data-approval-pending")["id"]
        with InboxStream(a.url, PEOPLE["carol"], last_event_id=resume_at) as back:
            _, removed = back.next()
            assert removed == {
                "type": "inbox-removed",
                "elicitationId": one,
                "outcome": "declined",
                "answeredBy": "bob",
            }
            _, added = back.next()
            assert added["type"] == "inbox-added" and added["elicitationId"] == two
        assert answer(b.url, "carol", two, content={"approve": False}).status_code == 200
        second.rest()


def test_an_escalation_and_an_expiry_reach_streams_on_both_hubs(
    redis_server: RedisServer, ops: OpsServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    changes = {"escalate_after_s": 1, "escalate_to": {"users": ["dave"]}, "timeout_s": 4}
    a, b = two_hubs(store_url(request, "redis"), ops, tmp_path, **changes)
    try:
        with InboxStream(b.url, PEOPLE["dave"]) as dave, InboxStream(a.url, PEOPLE["carol"]) as carol:
            assert dave.started() == [] and carol.started() == []
            with Requester(a.url, "alice", "conv-escalate", RESTART) as asked:
                eid = asked.until("data-approval-pending")["id"]
                assert carol.until("inbox-added")["elicitationId"] == eid
                # Whichever hub's sweep escalates it, dave's stream on B is told.
                assert dave.until("inbox-added")["elicitationId"] == eid
                expired = {"type": "inbox-removed", "elicitationId": eid, "outcome": "expired"}
                assert dave.until("inbox-removed") == expired
                assert carol.until("inbox-removed") == expired
                assert "nobody answered within 4 s" in tool_output(asked.rest())[0]
    finally:
        a.stop()
        b.stop()
