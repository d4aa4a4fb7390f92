"""Approvals in Slack: each approver with a Slack account gets a direct message with Approve / Deny (and Edit… with
`allow_edit`); a press answers as that approver, by the approval's rules, and a real SDK MCP server's tool is called
only when they approve; every direct message shows how the approval ended."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from elicithub.core.elicitation import State
from elicithub.surfaces.slack.approval_blocks import edit_view
from tests.conftest import free_port
from tests.surfaces.slack.conftest import ALICE, BOB, EVE, SlackHub, slack_config, submission
from tests.surfaces.slack.standin import Message, SlackStandIn
from tests.triggers.approving import RESTART, USERS, OpsServer, Requester, audit_record, policy, tool_output

CAROL, DAVE = "UCAROL", "UDAVE"
SLACK_USERS = {ALICE: "alice", BOB: "bob", CAROL: "carol", DAVE: "dave"}  # Eve has no mapping
APPROVE, DENY, EDIT = "elicithub.approve", "elicithub.deny", "elicithub.edit"

HubFor = Callable[..., SlackHub]


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


@pytest.fixture
def hub_for(slack_env: None, standin: SlackStandIn, tmp_path: Path, ops: OpsServer) -> Iterator[HubFor]:
    """A Slack hub whose one policy (`policy(**changes)`: group ops approves `ops.*`) is the test's."""
    hubs: list[SlackHub] = []

    def make(**changes: Any) -> SlackHub:
        port = free_port()
        data = slack_config(
            tmp_path,
            port,
            standin,
            users=USERS,
            groups={"ops": ["bob", "carol"]},
            mcp_servers=[{"id": "ops", "url": ops.url}],
            approvals=[policy(**changes)],
            admins=["dave"],  # who reads the audit
        )
        data["slack"]["users"] = SLACK_USERS
        hubs.append(SlackHub(data, port, standin))
        return hubs[-1]

    yield make
    for hub in hubs:
        hub.stop()


def dm_of(api: SlackStandIn, slack_user: str) -> Message:
    """The one direct message a person got, once it is there."""
    found: list[Message] = api.wait(lambda: api.direct_to(slack_user))
    assert len(found) == 1, found
    return found[0]


def ended(api: SlackStandIn, message: Message, label: str) -> None:
    api.wait(lambda: label in message.context() and not message.buttons())


def notes_to(api: SlackStandIn, slack_user: str) -> list[str]:
    return [str(e["text"]) for e in api.ephemerals if e["user"] == slack_user]


def note_to(api: SlackStandIn, slack_user: str) -> str:
    found: list[str] = api.wait(lambda: notes_to(api, slack_user))
    return found[-1]


def inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["label"]["text"]: b for b in view["blocks"] if b["type"] == "input"}


def opened_view(api: SlackStandIn, count: int) -> dict[str, Any]:
    view: dict[str, Any] = api.wait(lambda: api.views[count - 1] if len(api.views) >= count else None)
    return view


def test_each_approver_with_a_slack_account_gets_a_direct_message_with_approve_deny_and_edit(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "alice", "conv-dm", RESTART) as alice:
        eid = alice.until("data-approval-pending")["id"]
        bob, carol = dm_of(standin, BOB), dm_of(standin, CAROL)
        for dm in (bob, carol):
            assert dm.channel.startswith("D") and dm.text == "alice asks to call ops.restart. Approve this call?"
            assert [(b["text"]["text"], b["action_id"], b["value"]) for b in dm.buttons()] == [
                ("Approve", APPROVE, eid),
                ("Deny", DENY, eid),
                ("Edit…", EDIT, eid),
            ]
            assert '"replicas": 2' in dm.blocks[1]["text"]["text"]  # the call's arguments
            assert "group ops" in dm.context()
        opened = [c[1]["users"] for c in standin.calls if c[0] == "conversations.open"]
        assert sorted(opened) == [BOB, CAROL]  # not the requester, nor Dave (no approver) nor Eve (no account)
        hub.press(BOB, bob, APPROVE)
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    metrics = httpx.get(f"{hub.url}/metrics").text
    assert 'elicithub_notifications_total{channel="slack",outcome="sent"} 2.0' in metrics.splitlines()


def test_without_allow_edit_the_message_has_no_edit_button(hub_for: HubFor, standin: SlackStandIn) -> None:
    hub = hub_for(allow_edit=False)
    with Requester(hub.url, "alice", "conv-no-edit", RESTART) as alice:
        alice.until("data-approval-pending")
        bob = dm_of(standin, BOB)
        assert [b["text"]["text"] for b in bob.buttons()] == ["Approve", "Deny"]
        hub.press(BOB, bob, DENY)
        hub.submit(BOB, opened_view(standin, 1), {})
        alice.rest()


def test_approve_calls_the_tool_once_and_every_direct_message_says_who_approved(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "alice", "conv-approve", RESTART) as alice:
        alice.until("data-approval-pending")
        bob, carol = dm_of(standin, BOB), dm_of(standin, CAROL)
        hub.press(CAROL, carol, APPROVE)
        rest = alice.rest()
    assert next(p for p in rest if p["type"] == "data-elicitation-resolved")["data"]["answeredBy"] == "carol"
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 2}]
    for dm in (bob, carol):
        ended(standin, dm, "Approved by carol")
        assert dm.edits == 1


def test_deny_asks_a_reason_refuses_the_call_and_every_message_says_why(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "alice", "conv-deny", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        bob, carol = dm_of(standin, BOB), dm_of(standin, CAROL)
        hub.press(BOB, bob, DENY)
        view = opened_view(standin, 1)
        assert list(inputs(view)) == ["Reason"] and view["title"]["text"] == "Deny this call"
        assert hub.submit(BOB, view, {"Reason": "not during the freeze"}) == {}
        rest = alice.rest()
    assert tool_output(rest) == ("Call of ops.restart was not approved: denied by bob: not during the freeze", True)
    assert ops.calls == []
    for dm in (bob, carol):
        ended(standin, dm, "Denied by bob: not during the freeze")
    record = audit_record(hub.url, pending["id"])
    assert (record["answeredBy"], record["outcome"], record["reason"]) == ("bob", "denied", "not during the freeze")
    assert record["channel"] == "slack"


def test_a_second_approvers_press_is_not_taken_and_tells_them_who_answered(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "alice", "conv-second", RESTART) as alice:
        alice.until("data-approval-pending")
        bob, carol = dm_of(standin, BOB), dm_of(standin, CAROL)
        as_shown = copy.deepcopy(carol)
        hub.press(BOB, bob, APPROVE)
        alice.rest()
    ended(standin, carol, "Approved by bob")
    for action in (APPROVE, DENY):  # pressed on the message as Carol's Slack showed it before it was updated
        hub.press(CAROL, as_shown, action)
    notes = standin.wait(lambda: len(notes_to(standin, CAROL)) == 2 and notes_to(standin, CAROL))
    assert notes == ["This approval has ended: Approved by bob."] * 2
    assert ops.calls == [{"service": "orders", "replicas": 2}]
    assert standin.views == []  # Deny opened no modal on an ended approval
    assert carol.edits == 1


def test_people_who_may_not_answer_are_refused_and_the_approval_stays_open(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "bob", "conv-refused", RESTART) as bob:  # Bob asks, and is one of the approvers
        eid = bob.until("data-approval-pending")["id"]
        carol = dm_of(standin, CAROL)
        assert standin.direct_to(BOB) == []  # the requester gets no direct message
        refusals = {
            EVE: "Your Slack account is not linked to a hub user, so you cannot answer approvals here.",
            DAVE: "This approval is not yours to answer.",
            ALICE: "This approval is not yours to answer.",
            BOB: "This approval is of your own call: another approver must answer it.",  # no self_approval
        }
        for slack_user, refusal in refusals.items():
            for action in (APPROVE, DENY, EDIT):
                hub.press(slack_user, carol, action)
            notes = standin.wait(lambda u=slack_user: len(notes_to(standin, u)) == 3 and notes_to(standin, u))
            assert notes == [refusal] * 3
            forged = hub.interact(submission(slack_user, edit_view_of(hub, eid), {"Approve this call": True}))
            assert forged.json()["response_action"] == "update"
        assert standin.views == []
        stored = hub.on_loop(hub.hub.store.get(eid))
        assert stored is not None and stored.state is State.PENDING
        assert carol.buttons() and carol.edits == 0
        hub.press(CAROL, carol, APPROVE)  # still open to its approvers
        assert tool_output(bob.rest()) == ("Restarted orders with 2 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def edit_view_of(hub: SlackHub, eid: str) -> dict[str, Any]:
    """The Edit… modal of an approval, as its approvers are shown it."""
    stored = hub.on_loop(hub.hub.store.get(eid))
    assert stored is not None
    return edit_view(stored)


def test_edit_opens_the_form_a_bad_value_is_a_field_error_and_a_good_one_calls_with_it(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "alice", "conv-edit", RESTART) as alice:
        eid = alice.until("data-approval-pending")["id"]
        carol = dm_of(standin, CAROL)
        hub.press(CAROL, carol, EDIT)
        view = opened_view(standin, 1)
        fields = inputs(view)
        assert list(fields) == ["Approve this call", "Reason", "Service", "Replicas"]
        assert fields["Approve this call"]["element"]["initial_options"]  # ticked: Edit… is to approve
        assert fields["Replicas"]["element"]["initial_value"] == "2"

        refused = hub.submit(CAROL, view, {"Replicas": "20"})
        assert refused == {
            "response_action": "errors",
            "errors": {fields["Replicas"]["block_id"]: "must be at most 10"},
        }
        stored = hub.on_loop(hub.hub.store.get(eid))
        assert stored is not None and stored.state is State.PENDING
        assert carol.buttons() and ops.calls == []

        assert hub.submit(CAROL, view, {"Replicas": "3", "Reason": "more load today"}) == {}
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 3 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 3}]
    ended(standin, carol, "Approved by carol: more load today")


def test_an_approval_nobody_answers_shows_expired(hub_for: HubFor, standin: SlackStandIn, ops: OpsServer) -> None:
    hub = hub_for(timeout_s=2)
    with Requester(hub.url, "alice", "conv-expired", RESTART) as alice:
        alice.until("data-approval-pending")
        bob, carol = dm_of(standin, BOB), dm_of(standin, CAROL)
        as_shown = copy.deepcopy(bob)
        rest = alice.rest()
    assert tool_output(rest) == ("Call of ops.restart was not approved: nobody answered within 2 s", True)
    for dm in (bob, carol):
        ended(standin, dm, "Expired")
    hub.press(BOB, as_shown, APPROVE)
    assert note_to(standin, BOB) == "This approval has expired."
    assert ops.calls == []


def test_reminders_go_to_each_direct_message_and_an_escalation_to_the_new_approver(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for(remind_after_s=1, escalate_after_s=2, escalate_to={"users": ["dave"]})
    with Requester(hub.url, "alice", "conv-escalate", RESTART) as alice:
        alice.until("data-approval-pending")
        bob, carol = dm_of(standin, BOB), dm_of(standin, CAROL)
        dave = dm_of(standin, DAVE)  # once escalated to him
        for dm in (bob, carol):
            [reminder] = standin.wait(lambda m=dm: standin.in_thread(m.ts))
            assert reminder.channel == dm.channel and reminder.text.startswith("Reminder: alice asks to call")
        hub.press(DAVE, dave, APPROVE)
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    for dm in (bob, carol, dave):
        ended(standin, dm, "Approved by dave")
    assert len(standin.direct_to(DAVE)) == 1


def test_a_requester_in_a_slack_thread_sees_the_wait_there_with_nothing_to_press(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    thread = hub.say(ALICE, RESTART)
    waiting: Message = standin.wait(lambda: next(iter(standin.in_thread(thread)), None))
    assert waiting.text == "Waiting for approval by group ops." and waiting.buttons() == []
    hub.press(BOB, dm_of(standin, BOB), APPROVE)
    standin.wait(lambda: "Approved by bob" in waiting.context())
    reply = standin.wait(lambda: [m for m in standin.in_thread(thread) if m.ts > waiting.ts])
    assert reply[0].text == "Restarted orders with 2 replicas."
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def test_approve_of_arguments_the_tool_refuses_says_why_and_leaves_the_approval_open(
    hub_for: HubFor, standin: SlackStandIn, ops: OpsServer
) -> None:
    hub = hub_for()
    with Requester(hub.url, "alice", "conv-bad", '/call ops.restart {"service": "orders", "replicas": 20}') as alice:
        eid = alice.until("data-approval-pending")["id"]
        bob = dm_of(standin, BOB)
        hub.press(BOB, bob, APPROVE)
        note = note_to(standin, BOB)
        why = "replicas: 20 is greater than the maximum of 10"
        assert note == f"Not approved: {why}. Deny it, or correct it with Edit…."
        stored = hub.on_loop(hub.hub.store.get(eid))
        assert stored is not None and stored.state is State.PENDING and bob.buttons()
        hub.press(BOB, bob, EDIT)
        assert hub.submit(BOB, opened_view(standin, 1), {"Replicas": "4"}) == {}
        assert tool_output(alice.rest()) == ("Restarted orders with 4 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 4}]
