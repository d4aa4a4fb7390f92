"""Teams across two `elicithub serve` processes sharing a store (Redis, and Postgres) and one Microsoft: an activity
may land on either hub. A press on the other hub answers a question the first hub's run asked; approvers get one
card each, are reminded once and escalated to once whichever hub's sweep fires; and every card update is sent once,
by the hub where the question or approval ended."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.test_scale_out import ServedHub
from tests.surfaces.teams.conftest import ALICE, BOB, SignedTeams
from tests.surfaces.teams.standin import Message, MicrosoftStandIn
from tests.surfaces.teams.test_approvals import CAROL, DAVE, approvals_config, card_of, ended
from tests.triggers.approving import RESTART, OpsServer, Requester, tool_output


class ServedTeamsHub(SignedTeams, ServedHub):
    """`elicithub serve` in its own process, reached the way the Bot Framework reaches it."""

    def __init__(self, config: Path, log: Path, microsoft: MicrosoftStandIn) -> None:
        super().__init__(config, log)
        self.microsoft = microsoft


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


@pytest.fixture
def two_hubs(
    teams_env: None, microsoft: MicrosoftStandIn, shared_url: str, ops: OpsServer, tmp_path: Path
) -> Iterator[tuple[ServedTeamsHub, ServedTeamsHub]]:
    """Two hubs on one store and one Microsoft, with the demo's deploy form; group ops approves `ops.*`, reminded
    after 1 s, escalated to Dave after 2 s."""
    changes = {"remind_after_s": 1, "escalate_after_s": 2, "escalate_to": {"users": ["dave"]}, "timeout_s": 120}
    data = approvals_config(tmp_path, 0, microsoft, **changes)
    data.pop("public_url")
    data["store"] = {"url": shared_url, "heartbeat_s": 0.5}
    data["mcp_servers"] = [{"id": "ops", "url": ops.url}]
    data["demo"] = {"enabled": True}
    config = tmp_path / "hub.yaml"
    config.write_text(json.dumps(data))
    a = ServedTeamsHub(config, tmp_path / "a.log", microsoft)
    b = ServedTeamsHub(config, tmp_path / "b.log", microsoft)
    try:
        a.wait()
        b.wait()
        yield a, b
    finally:
        a.stop()
        b.stop()


def puts_to(api: MicrosoftStandIn, message: Message) -> int:
    return sum(1 for c in api.calls if c.method == "PUT" and c.path.endswith(f"/activities/{message.id}"))


def test_a_press_on_the_other_hub_answers_and_the_card_is_updated_once(
    two_hubs: tuple[ServedTeamsHub, ServedTeamsHub], microsoft: MicrosoftStandIn
) -> None:
    a, b = two_hubs
    chat = a.say(ALICE, '/call deploy.deploy_service {"service": "orders"}')
    question: Message = microsoft.wait(lambda: next((m for m in microsoft.in_conversation(chat) if m.card), None))
    answered = b.press(
        ALICE, question, "Submit", {"Region": "eu-west-1", "I understand this deploys to production": True}
    )
    assert "Answered by Alice" in Message(chat, "", card=answered["value"]).texts()
    microsoft.wait(lambda: "Answered by Alice" in question.texts() and not question.actions())
    reply = microsoft.wait(
        lambda: [m for m in microsoft.in_conversation(chat) if "Deployed" in m.text and not m.streaming]
    )
    assert reply[0].text == "Deployed orders to eu-west-1 with 2 replicas."
    assert puts_to(microsoft, question) == 1


def test_approvers_get_one_card_each_reminded_and_escalated_once_and_every_card_is_updated_once(
    two_hubs: tuple[ServedTeamsHub, ServedTeamsHub], microsoft: MicrosoftStandIn, ops: OpsServer
) -> None:
    a, b = two_hubs
    with Requester(a.url, "alice", "conv-two-hubs", RESTART) as alice:
        alice.until("data-approval-pending")
        bob, carol = card_of(microsoft, BOB), card_of(microsoft, CAROL)
        dave = card_of(microsoft, DAVE)  # escalated to, by whichever hub's sweep took the timer
        for person in (BOB, CAROL):
            microsoft.wait(lambda p=person: [m for m in microsoft.chat_with(p) if not m.card])
        b.press(DAVE, dave, "Approve")
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 2}]
    for card in (bob, carol, dave):
        ended(microsoft, card, "Approved by dave")
    opened = sorted(c.body["members"][0]["id"] for c in microsoft.calls if c.path.endswith("/v3/conversations"))
    assert opened == sorted([BOB, CAROL, DAVE])
    assert [len(microsoft.chat_with(p)) for p in (BOB, CAROL, DAVE)] == [2, 2, 1]  # a card each, one reminder
    assert [puts_to(microsoft, card) for card in (bob, carol, dave)] == [1, 1, 1]
