"""Approvals in Slack across two `elicithub serve` processes sharing Redis and one Slack: approvers are sent one
direct message each, reminded once and escalated to once whichever hub's sweep fires; a press on the other hub
answers; the hub where the approval ends updates every direct message once, whichever hub sent it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import eventually
from tests.core_fixtures import RedisServer
from tests.server.test_scale_out import ServedHub
from tests.surfaces.slack.conftest import BOB, SignedSlack
from tests.surfaces.slack.standin import Message, SlackStandIn
from tests.surfaces.slack.test_approvals import APPROVE, CAROL, DAVE, SLACK_USERS, dm_of, ended
from tests.triggers.approving import RESTART, USERS, OpsServer, Requester, policy, tool_output

DB = 6  # a database of its own on the session's redis-server


class ServedSlackHub(SignedSlack, ServedHub):
    """`elicithub serve` in its own process, reached the way Slack reaches it."""


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


@pytest.fixture
def two_hubs(
    slack_env: None, standin: SlackStandIn, redis_server: RedisServer, ops: OpsServer, tmp_path: Path
) -> Iterator[tuple[ServedSlackHub, ServedSlackHub]]:
    """Two hubs on one Redis database and one Slack; group ops approves `ops.*`, reminded after 1 s, escalated to
    Dave after 2 s."""
    with redis_server.client(DB) as client:
        client.flushdb()
    config = tmp_path / "hub.yaml"
    approvals = policy(remind_after_s=1, escalate_after_s=2, escalate_to={"users": ["dave"]}, timeout_s=120)
    config.write_text(
        json.dumps(
            {
                "store": {"url": redis_server.url(DB), "heartbeat_s": 0.5},
                "secrets": {"key_file": str(tmp_path / "secret.key")},
                "users": USERS,
                "groups": {"ops": ["bob", "carol"]},
                "mcp_servers": [{"id": "ops", "url": ops.url}],
                "approvals": [approvals],
                "slack": {"api_url": standin.api_url, "users": SLACK_USERS},
            }
        )
    )
    a, b = ServedSlackHub(config, tmp_path / "a.log"), ServedSlackHub(config, tmp_path / "b.log")
    try:
        a.wait()
        b.wait()
        yield a, b
    finally:
        a.stop()
        b.stop()


def reminders(api: SlackStandIn, dm: Message) -> list[Message]:
    return api.in_thread(dm.ts)


def calls(api: SlackStandIn, method: str) -> list[str]:
    """Who each call of `method` went to (the user a direct message was opened with, or the message's ts)."""
    return [str(params.get("users") or params.get("ts")) for name, params in api.calls if name == method]


def test_asked_on_one_hub_answered_on_the_other_each_message_is_sent_reminded_and_updated_once(
    two_hubs: tuple[ServedSlackHub, ServedSlackHub], standin: SlackStandIn, ops: OpsServer
) -> None:
    a, b = two_hubs
    with Requester(a.url, "alice", "conv-two-hubs", RESTART) as alice:
        alice.until("data-approval-pending")
        bob, carol = dm_of(standin, BOB), dm_of(standin, CAROL)
        dave = dm_of(standin, DAVE)  # escalated to, by whichever hub's sweep took the timer
        for dm in (bob, carol):
            standin.wait(lambda m=dm: reminders(standin, m))
        b.press(DAVE, dave, APPROVE)
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 2}]
    for dm in (bob, carol, dave):
        ended(standin, dm, "Approved by dave")
    assert sorted(calls(standin, "conversations.open")) == [BOB, CAROL, DAVE]
    assert [len(reminders(standin, dm)) for dm in (bob, carol, dave)] == [1, 1, 0]
    assert sorted(calls(standin, "chat.update")) == sorted([bob.ts, carol.ts, dave.ts])


def test_when_the_hub_that_sent_the_messages_is_killed_the_other_answers_and_updates_them(
    two_hubs: tuple[ServedSlackHub, ServedSlackHub], standin: SlackStandIn, ops: OpsServer
) -> None:
    a, b = two_hubs
    with Requester(a.url, "alice", "conv-killed", RESTART) as alice:
        alice.until("data-approval-pending")
        bob, carol = dm_of(standin, BOB), dm_of(standin, CAROL)
        a.process.kill()  # kill -9: the messages A sent are known only from the store
        a.process.wait()
    dave = dm_of(standin, DAVE)  # the timers are on the store: B escalates if A had not yet
    b.press(CAROL, carol, APPROVE)
    # B takes A's run over (A's heartbeat stopped), makes the call and shows the approval's end.
    for dm in (bob, carol, dave):
        ended(standin, dm, "Approved by carol")
    eventually(lambda: ops.calls == [{"service": "orders", "replicas": 2}], f"no call: {ops.calls}")
    assert sorted(calls(standin, "chat.update")) == sorted([bob.ts, carol.ts, dave.ts])
