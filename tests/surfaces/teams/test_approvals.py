"""Approvals in Teams: each approver with a Teams account gets a card in their 1:1 chat, opened by the hub (the tool,
its arguments, the requester, the deadline; Approve, Deny with a reason and the editable arguments); a press answers
as that approver by the approval's rules, a real SDK MCP server's tool is called only when they approve, reminders and
escalations arrive the same way, and every card shows how the approval ended and by whom, wherever it ended."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from elicithub.core.elicitation import State
from tests.conftest import free_port
from tests.surfaces.teams.conftest import ALICE, BOB, EVE, TeamsHub, teams_config
from tests.surfaces.teams.standin import Message, MicrosoftStandIn
from tests.triggers.approving import RESTART, USERS, OpsServer, Requester, answer, audit_record, policy, tool_output

CAROL, DAVE = "0a1b2c3d-0000-4000-8000-0000000000c0", "0a1b2c3d-0000-4000-8000-0000000000d0"
TEAMS_USERS = {ALICE: "alice", BOB: "bob", CAROL: "carol", DAVE: "dave"}  # Eve has no mapping
CARD = "application/vnd.microsoft.card.adaptive"
NOTE = "application/vnd.microsoft.activity.message"

HubFor = Callable[..., TeamsHub]


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


def approvals_config(tmp_path: Path, port: int, microsoft: MicrosoftStandIn, **changes: Any) -> dict[str, Any]:
    """Group ops (Bob, Carol) approves `ops.*` (`policy(**changes)`); chats are opened at the stand-in's connector."""
    data = teams_config(
        tmp_path,
        port,
        microsoft,
        users=USERS,
        groups={"ops": ["bob", "carol"]},
        approvals=[policy(**changes)],
        admins=["dave"],  # who reads the audit
    )
    data["teams"].update(users=TEAMS_USERS, service_url=microsoft.service_url)
    return data


@pytest.fixture
def hub_for(teams_env: None, microsoft: MicrosoftStandIn, tmp_path: Path, ops: OpsServer) -> Iterator[HubFor]:
    hubs: list[TeamsHub] = []

    def make(**changes: Any) -> TeamsHub:
        port = free_port()
        data = approvals_config(tmp_path, port, microsoft, **changes)
        data["mcp_servers"] = [{"id": "ops", "url": ops.url}]
        hubs.append(TeamsHub(data, port, microsoft))
        return hubs[-1]

    yield make
    for hub in hubs:
        hub.stop()


def card_of(api: MicrosoftStandIn, object_id: str) -> Message:
    """The one approval card a person got in their 1:1 chat (opened by their object id: they never wrote)."""
    found: list[Message] = api.wait(lambda: [m for m in api.chat_with(object_id) if m.card])
    assert len(found) == 1, found
    return found[0]


def ended(api: MicrosoftStandIn, card: Message, label: str) -> None:
    api.wait(lambda: label in card.texts() and not card.actions())


def test_each_approver_with_a_teams_account_gets_a_card_in_their_own_chat(
    hub_for: HubFor, microsoft: MicrosoftStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "alice", "conv-card", RESTART) as alice:
        eid = alice.until("data-approval-pending")["id"]
        bob, carol = card_of(microsoft, BOB), card_of(microsoft, CAROL)
        for card in (bob, carol):
            texts = card.texts()
            assert "alice asks to call ops.restart. Approve this call?" in texts
            assert "Tool: ops.restart" in texts and "Requester: alice" in texts and "Asked of: group ops" in texts
            assert "Open until: " in texts and '"replicas": 2' in texts
            assert [(a["title"], a["verb"], a["data"]["elicitationId"]) for a in card.actions()] == [
                ("Approve", "elicithub.approve", eid),
                ("Deny", "elicithub.deny", eid),
            ]
            assert list(card.inputs()) == ["Service", "Replicas", "Reason (optional)"]
            assert card.inputs()["Replicas"]["value"] == 2
        opened = sorted(c.body["members"][0]["id"] for c in microsoft.calls if c.path.endswith("/v3/conversations"))
        assert opened == sorted([BOB, CAROL])  # not the requester, nor Dave (no approver) nor Eve (no account)
        pressed = hub.press(BOB, bob, "Approve")
        assert pressed["type"] == CARD and "Approved by bob" in Message("", "", card=pressed["value"]).texts()
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    for card in (bob, carol):
        ended(microsoft, card, "✅ Approved by bob")
        assert card.updates == 1
    assert ops.calls == [{"service": "orders", "replicas": 2}]
    metrics = httpx.get(f"{hub.url}/metrics").text
    assert 'elicithub_notifications_total{channel="teams",outcome="sent"} 2.0' in metrics.splitlines()


def test_deny_with_a_reason_refuses_the_call_and_every_card_says_why(
    hub_for: HubFor, microsoft: MicrosoftStandIn, ops: OpsServer
) -> None:
    hub = hub_for(allow_edit=False)
    with Requester(hub.url, "alice", "conv-deny", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        bob, carol = card_of(microsoft, BOB), card_of(microsoft, CAROL)
        assert list(bob.inputs()) == ["Reason (optional)"]  # without allow_edit, nothing to change
        hub.press(BOB, bob, "Deny", {"Reason (optional)": "not during the freeze"})
        rest = alice.rest()
    assert tool_output(rest) == ("Call of ops.restart was not approved: denied by bob: not during the freeze", True)
    assert ops.calls == []
    for card in (bob, carol):
        ended(microsoft, card, "🚫 Denied by bob: not during the freeze")
    record = audit_record(hub.url, pending["id"])
    assert (record["answeredBy"], record["outcome"], record["reason"]) == ("bob", "denied", "not during the freeze")


def test_an_edit_that_does_not_fit_comes_back_with_its_error_and_a_good_one_is_called(
    hub_for: HubFor, microsoft: MicrosoftStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "alice", "conv-edit", RESTART) as alice:
        eid = alice.until("data-approval-pending")["id"]
        carol = card_of(microsoft, CAROL)
        refused = hub.press(CAROL, carol, "Approve", {"Replicas": 20})
        again = Message(carol.conversation, carol.id, card=refused["value"])
        assert refused["type"] == CARD and "must be at most 10" in again.texts()
        assert again.inputs()["Replicas"]["value"] == 20 and again.titles() == ["Approve", "Deny"]
        stored = hub.on_loop(hub.hub.store.get(eid))
        assert stored is not None and stored.state is State.PENDING and ops.calls == [] and carol.updates == 0
        hub.press(CAROL, again, "Approve", {"Replicas": 3, "Reason (optional)": "more load today"})
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 3 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 3}]
    ended(microsoft, carol, "Approved by carol: more load today")


def test_people_who_may_not_answer_are_refused_and_a_late_press_is_told_it_ended(
    hub_for: HubFor, microsoft: MicrosoftStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "bob", "conv-refused", RESTART) as bob:  # Bob asks, and is one of the approvers
        eid = bob.until("data-approval-pending")["id"]
        carol = card_of(microsoft, CAROL)
        assert microsoft.chat_with(BOB) == []  # the requester gets no card
        refusals = {
            EVE: "Your Teams account is not linked to a hub user, so you cannot answer approvals here.",
            DAVE: "This approval is not yours to answer.",
            ALICE: "This approval is not yours to answer.",
            BOB: "This approval is of your own call: another approver must answer it.",  # no self_approval
        }
        for object_id, refusal in refusals.items():
            for title in ("Approve", "Deny"):
                assert hub.press(object_id, carol, title) == {"statusCode": 200, "type": NOTE, "value": refusal}
        stored = hub.on_loop(hub.hub.store.get(eid))
        assert stored is not None and stored.state is State.PENDING and carol.updates == 0
        as_shown = copy.deepcopy(carol)
        hub.press(CAROL, carol, "Approve")
        assert tool_output(bob.rest()) == ("Restarted orders with 2 replicas.", False)
    ended(microsoft, carol, "Approved by carol")
    late = hub.press(CAROL, as_shown, "Deny")  # pressed on the card as her Teams showed it before the update
    assert late == {"statusCode": 200, "type": NOTE, "value": "This approval has ended: Approved by carol."}
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def test_reminders_go_to_each_chat_and_an_escalation_brings_a_card_to_the_new_approver(
    hub_for: HubFor, microsoft: MicrosoftStandIn, ops: OpsServer
) -> None:
    hub = hub_for(remind_after_s=1, escalate_after_s=2, escalate_to={"users": ["dave"]})
    with Requester(hub.url, "alice", "conv-escalate", RESTART) as alice:
        alice.until("data-approval-pending")
        bob, carol = card_of(microsoft, BOB), card_of(microsoft, CAROL)
        dave = card_of(microsoft, DAVE)  # once escalated to him
        for person in (BOB, CAROL):
            [reminder] = microsoft.wait(lambda p=person: [m for m in microsoft.chat_with(p) if not m.card])
            assert reminder.text.startswith("Reminder: alice asks to call ops.restart.")
        assert "Asked of: dave, group ops" in dave.texts()
        hub.press(DAVE, dave, "Approve")
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    for card in (bob, carol, dave):
        ended(microsoft, card, "Approved by dave")
    assert len(microsoft.chat_with(DAVE)) == 1


def test_an_approval_ended_elsewhere_shows_on_every_card(
    hub_for: HubFor, microsoft: MicrosoftStandIn, ops: OpsServer
) -> None:
    hub = hub_for(timeout_s=2)
    with Requester(hub.url, "alice", "conv-elsewhere", RESTART) as alice:
        eid = alice.until("data-approval-pending")["id"]
        bob, carol = card_of(microsoft, BOB), card_of(microsoft, CAROL)
        assert (
            answer(hub.url, "carol", eid, "accept", {"approve": False, "reason": "from the inbox"}).status_code == 200
        )
        alice.rest()
    for card in (bob, carol):
        ended(microsoft, card, "Denied by carol: from the inbox")
    with Requester(hub.url, "alice", "conv-expires", RESTART) as alice:  # nobody answers this one
        alice.until("data-approval-pending")
        rest = alice.rest()
    assert tool_output(rest) == ("Call of ops.restart was not approved: nobody answered within 2 s", True)
    microsoft.wait(lambda: sum("⌛ Expired" in m.texts() for m in microsoft.chat_with(BOB)) == 1)


def test_a_requester_in_teams_sees_the_wait_in_their_conversation_with_nothing_to_press(
    hub_for: HubFor, microsoft: MicrosoftStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    chat = hub.say(ALICE, RESTART)
    waiting: Message = microsoft.wait(lambda: next(iter(microsoft.in_conversation(chat)), None))
    assert waiting.texts() == "Waiting for approval by group ops." and waiting.actions() == []
    hub.press(BOB, card_of(microsoft, BOB), "Approve")
    microsoft.wait(lambda: "Approved by bob" in waiting.texts())
    reply = microsoft.wait(lambda: [m for m in microsoft.in_conversation(chat)[1:] if m.text and not m.streaming])
    assert reply[0].text == "Restarted orders with 2 replicas."
    assert ops.calls == [{"service": "orders", "replicas": 2}]
