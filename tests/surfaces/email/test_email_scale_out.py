"""Email across two `elicithub serve` processes sharing Redis (and one Slack): each mail, reminder and escalation is
sent once whichever hub's sweep fires it, a link answers on either hub, and three people answering one approval at
once on three surfaces (the inbox API, Slack, an email page) on two hubs make one decision, which every surface shows.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import eventually
from tests.core_fixtures import RedisServer
from tests.server.test_scale_out import ServedHub
from tests.surfaces.email.conftest import email_config, form_token, links, post, status_of
from tests.surfaces.email.mailserver import MailServer
from tests.surfaces.pages.inboxes import listed
from tests.surfaces.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SignedSlack
from tests.surfaces.slack.standin import SlackStandIn
from tests.surfaces.slack.test_approvals import APPROVE, DAVE, dm_of, ended, notes_to
from tests.triggers.approving import PEOPLE, RESTART, USERS, OpsServer, Requester, answer, policy, tool_output

DB = 8  # a database of its own on the session's redis-server


class TwoHubs(SignedSlack, ServedHub):
    """`elicithub serve` in its own process, reached as Slack reaches it too."""


Hubs = Callable[..., tuple[TwoHubs, TwoHubs]]


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackStandIn]:
    """Slack's Web API as the Slack tests stand it in, with the app's secrets in the hubs' environment."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    api = SlackStandIn(BOT_TOKEN)
    yield api
    api.stop()


@pytest.fixture
def two_hubs(
    slack: SlackStandIn,
    mail: MailServer,
    redis_server: RedisServer,
    ops: OpsServer,
    tmp_path: Path,
) -> Iterator[Hubs]:
    """Two hubs on one Redis database, one Slack (where dave has an account) and one mail server (where everyone has
    an address), with the approval policy given."""
    started: list[TwoHubs] = []

    def start(approvals: dict[str, Any]) -> tuple[TwoHubs, TwoHubs]:
        with redis_server.client(DB) as client:
            client.flushdb()
        config = tmp_path / "hub.yaml"
        settings = {
            "store": {"url": redis_server.url(DB), "heartbeat_s": 0.5},
            "secrets": {"key_file": str(tmp_path / "secret.key")},
            "users": USERS,
            "admins": ["dave"],
            "groups": {"ops": ["bob", "carol"]},
            "mcp_servers": [{"id": "ops", "url": ops.url}],
            "approvals": [approvals],
            "slack": {"api_url": slack.api_url, "users": {DAVE: "dave"}},
            "email": email_config(mail),
        }
        config.write_text(json.dumps(settings))
        started.extend([TwoHubs(config, tmp_path / "a.log"), TwoHubs(config, tmp_path / "b.log")])
        for hub in started:
            hub.wait()
        return started[0], started[1]

    yield start
    for hub in started:
        hub.stop()


def on(hub: ServedHub, url: str) -> str:
    """A link as if it had been sent by `hub` (each hub's links name its own address; any hub's serve them)."""
    return re.sub(r"^https?://[^/]+", hub.url, url)


def sent(hubs: tuple[ServedHub, ...]) -> float:
    """Mails the hubs sent, together (each counts its own)."""
    total = 0.0
    for hub in hubs:
        metrics = httpx.get(f"{hub.url}/metrics").text
        found = re.search(r'^elicithub_notifications_total{channel="email",outcome="sent"} (\S+)$', metrics, re.M)
        total += float(found.group(1)) if found else 0.0
    return total


def test_each_mail_reminder_and_escalation_is_sent_once_across_two_hubs(
    two_hubs: Hubs, mail: MailServer, ops: OpsServer
) -> None:
    a, b = two_hubs(policy(remind_after_s=1, escalate_after_s=2, escalate_to={"users": ["dave"]}, timeout_s=120))
    with Requester(a.url, "alice", "conv-two-hubs", RESTART) as alice:
        alice.until("data-approval-pending")
        eventually(lambda: any(m["To"] == "dave@acme.test" for m in mail.messages), "dave was not mailed", 90)
        eventually(lambda: len(mail.messages) >= 5, f"{len(mail.messages)} mails", 90)
        [dave] = mail.to("dave@acme.test")
        assert dave["Subject"] == "Escalated to you: approval of ops.restart for alice"
        assert post(on(b, links(dave)["approve"]), {"reason": "escalated"}).status_code == 303  # on the other hub
        assert tool_output(alice.rest()) == ("Restarted orders with 2 replicas.", False)
    subjects = Counter((m["To"], m["Subject"].split(":")[0]) for m in mail.messages)
    assert subjects == {
        ("bob@acme.test", "Approval needed"): 1,
        ("carol@acme.test", "Approval needed"): 1,
        ("bob@acme.test", "Reminder"): 1,
        ("carol@acme.test", "Reminder"): 1,
        ("dave@acme.test", "Escalated to you"): 1,
    }
    assert sent((a, b)) == 5
    assert status_of(on(a, links(mail.to("bob@acme.test")[0])["deny"])) == "Approved by dave: escalated."


def test_three_people_on_three_surfaces_on_two_hubs_make_one_decision_that_every_surface_shows(
    two_hubs: Hubs, mail: MailServer, slack: SlackStandIn, ops: OpsServer
) -> None:
    a, b = two_hubs(policy(approvers={"users": ["bob", "carol", "dave"]}, timeout_s=120))
    with Requester(a.url, "alice", "conv-race", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        mail.wait(3)
        carol = {page: on(b, url) for page, url in links(mail.to("carol@acme.test")[0]).items()}
        csrf = form_token(httpx.get(carol["deny"]).text)
        dm = dm_of(slack, DAVE)
        start = threading.Barrier(3)
        outcomes: dict[str, int] = {}

        def inbox_api() -> None:  # bob approves through the hub's HTTP API, on hub A
            start.wait()
            outcomes["bob"] = answer(a.url, "bob", pending["id"], content={"approve": True}).status_code

        def email_page() -> None:  # carol denies on her mail's page, on hub B
            start.wait()
            outcomes["carol"] = post(carol["deny"], {"reason": "freeze"}, csrf).status_code

        def in_slack() -> None:  # dave approves in Slack, on hub B
            start.wait()
            outcomes["dave"] = b.press(DAVE, dm, APPROVE).status_code

        pressing = [threading.Thread(target=f) for f in (inbox_api, email_page, in_slack)]
        for thread in pressing:
            thread.start()
        for thread in pressing:
            thread.join()
        rest = alice.rest()
    resolved = next(p for p in rest if p["type"] == "data-elicitation-resolved")["data"]
    winner = resolved["answeredBy"]
    with httpx.Client(headers={"authorization": f"Bearer {PEOPLE['dave']}"}) as client:
        records = [
            r for r in client.get(f"{a.url}/run/api/audit").json()["records"] if r["elicitationId"] == pending["id"]
        ]
    [record] = records  # one decision
    channel = {"bob": "chat", "carol": "email", "dave": "slack"}[winner]
    assert (record["answeredBy"], record["channel"]) == (winner, channel)
    approved = winner != "carol"
    assert record["outcome"] == ("approved" if approved else "denied")
    assert ops.calls == ([{"service": "orders", "replicas": 2}] if approved else [])
    assert tool_output(rest)[1] is not approved
    words = f"Approved by {winner}" if approved else "Denied by carol: freeze"
    # The losers were told it had ended; every surface shows the end, on both hubs.
    assert outcomes == {
        "bob": 200 if winner == "bob" else 409,
        "carol": 303 if winner == "carol" else 409,
        "dave": 200,
    }
    if winner != "dave":
        eventually(lambda: any("has ended" in note for note in notes_to(slack, DAVE)), "dave was not told")
    ended(slack, dm, words)
    for hub in (a, b):
        for person in ("bob", "carol", "dave"):
            assert listed(hub.url, PEOPLE[person]) == []
            [mailed] = mail.to(f"{person}@acme.test")
            for url in links(mailed).values():
                assert status_of(on(hub, url)) == f"{words}."
