"""Approvals across two `elicithub serve` processes sharing Redis: approvers answering on both hubs at once have one
winner, and an approval's reminder and escalation notices fire once, on a survivor when the hub that asked is killed
outright."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import eventually
from tests.core_fixtures import RedisServer
from tests.server.test_scale_out import ServedHub
from tests.triggers.approving import PEOPLE, RESTART, USERS, OpsServer, Requester, answer, policy

DB = 6  # a database no other test uses, on the session's redis-server


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


@pytest.fixture
def two_hubs(
    redis_server: RedisServer, ops: OpsServer, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[ServedHub, ServedHub]]:
    """Two hubs on one Redis database; the test's policy (`request.param`) applies to `ops.*`."""
    with redis_server.client(DB) as client:
        client.flushdb()
    config = tmp_path / "hub.yaml"
    config.write_text(
        json.dumps(
            {
                "store": {"url": redis_server.url(DB), "heartbeat_s": 0.5},
                "secrets": {"key_file": str(tmp_path / "secret.key")},
                "users": USERS,
                "groups": {"ops": ["bob", "carol", "dave"]},
                "admins": ["dave"],
                "mcp_servers": [{"id": "ops", "url": ops.url}],
                "approvals": [policy(**request.param)],
            }
        )
    )
    a, b = ServedHub(config, tmp_path / "a.log"), ServedHub(config, tmp_path / "b.log")
    try:
        a.wait()
        b.wait()
        yield a, b
    finally:
        a.stop()
        b.stop()


def lines(hub: ServedHub, text: str) -> int:
    return sum(text in line for line in hub.log.read_text().splitlines())


@pytest.mark.parametrize("two_hubs", [{}], indirect=True)
def test_approvers_answering_on_both_hubs_at_once_have_exactly_one_winner(
    two_hubs: tuple[ServedHub, ServedHub], ops: OpsServer
) -> None:
    a, b = two_hubs

    async def answer_all(eid: str) -> list[httpx.Response]:
        async def one(url: str, user: str, replicas: int) -> httpx.Response:
            headers = {"authorization": f"Bearer {PEOPLE[user]}"}
            body = {"elicitationId": eid, "action": "accept", "content": {"approve": True, "replicas": replicas}}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
                return await client.post("/run/api/elicitation-responses", json=body)

        approvers = [(a.url, "bob", 3), (b.url, "carol", 4), (b.url, "dave", 5), (a.url, "carol", 6)]
        return list(await asyncio.gather(*(one(*approver) for approver in approvers)))

    with Requester(a.url, "alice", "conv-race", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        replies = asyncio.run(answer_all(pending["id"]))
        rest = alice.rest()
    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200, 409, 409, 409], [r.text for r in replies]
    [winner] = [n for n, r in enumerate(replies) if r.status_code == 200]
    winner_replicas = [3, 4, 5, 6][winner]
    assert ops.calls == [{"service": "orders", "replicas": winner_replicas}]
    answered_by = next(p for p in rest if p["type"] == "data-elicitation-resolved")["data"]["answeredBy"]
    assert answered_by == ["bob", "carol", "dave", "carol"][winner]


@pytest.mark.parametrize(
    "two_hubs", [{"remind_after_s": 1, "escalate_after_s": 2, "escalate_to": {"users": ["alice"]}}], indirect=True
)
def test_a_reminder_and_an_escalation_are_each_told_once_across_two_hubs(
    two_hubs: tuple[ServedHub, ServedHub], ops: OpsServer
) -> None:
    a, b = two_hubs

    def told(text: str) -> int:
        return lines(a, text) + lines(b, text)

    with Requester(a.url, "bob", "conv-notices", RESTART) as bob:
        pending = bob.until("data-approval-pending")
        eid = pending["id"]
        eventually(lambda: lines(a, f"approval {eid} asked of group ops") == 1, "the approvers were not told")
        # Both hubs sweep; each timer is taken by one of them (a store's take has one winner).
        eventually(lambda: told(f"approval {eid}: escalated") > 0, "no escalation")
        eventually(lambda: told(f"approval {eid}: reminded") > 0, "no reminder")
        assert told(f"approval {eid}: reminded group ops") == 1
        assert told(f"approval {eid}: escalated to alice") == 1
        assert answer(b.url, "alice", eid, content={"approve": True}).status_code == 200  # escalated to her
        rest = bob.rest()
    assert ops.calls == [{"service": "orders", "replicas": 2}]
    assert next(p for p in rest if p["type"] == "data-elicitation-resolved")["data"]["answeredBy"] == "alice"


@pytest.mark.parametrize(
    "two_hubs",
    [{"remind_after_s": 10, "escalate_after_s": 12, "escalate_to": {"users": ["alice"]}, "timeout_s": 120}],
    indirect=True,
)
def test_when_the_hub_that_asked_is_killed_the_survivor_reminds_escalates_and_goes_on_with_the_run(
    two_hubs: tuple[ServedHub, ServedHub], ops: OpsServer
) -> None:
    a, b = two_hubs
    with Requester(a.url, "bob", "conv-killed", RESTART) as bob:
        eid = bob.until("data-approval-pending")["id"]
        a.process.kill()  # kill -9: nothing of A's memory survives, its timers are on the store
        a.process.wait()
    # Before the escalation, the one it escalates to may not answer (the timers are seconds away).
    assert answer(b.url, "alice", eid, content={"approve": True}).status_code == 404
    eventually(lambda: lines(b, f"approval {eid}: escalated to alice") == 1, "no escalation on the survivor")
    assert lines(b, f"approval {eid}: reminded group ops") == 1
    assert lines(a, f"approval {eid}: reminded") == 0
    approved = answer(b.url, "alice", eid, content={"approve": True, "replicas": 7})
    assert approved.status_code == 200, approved.text
    # B takes A's run over (A's heartbeat stopped) and makes the call, with the escalated approver's edit.
    eventually(lambda: ops.calls == [{"service": "orders", "replicas": 7}], f"no call: {ops.calls}")
    with httpx.Client(base_url=b.url, headers={"authorization": f"Bearer {PEOPLE['dave']}"}) as dave:
        [record] = dave.get("/run/api/audit").json()["records"]
    assert record["answeredBy"] == "alice" and record["outcome"] == "approved"
    assert record["approvers"] == {"users": ["alice"], "groups": ["ops"]}
