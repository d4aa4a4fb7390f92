"""Approvals through the public contract: a policy's approvers answer at `POST /run/api/elicitation-responses`, the
requester's stream shows the wait and who answered, and a real SDK MCP server's tool is called (with the approver's
edits) only when they approve."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from elicithub.core.approval import People
from elicithub.core.elicitation import Elicitation
from elicithub.runtime.audit import ApprovalRecord, Filters
from tests.conftest import HubFactory, RunningHub, sse_data
from tests.shapes import assert_shaped
from tests.triggers.approving import (
    GROUPS,
    RESTART,
    USERS,
    OpsServer,
    Requester,
    answer,
    audit_record,
    person,
    policy,
    tool_output,
    ui_body,
)
from tests.triggers.test_a2a_agents import AgentProcess, agent_entry


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


def approvals_hub(make_hub: HubFactory, ops: OpsServer, **changes: Any) -> RunningHub:
    settings: dict[str, Any] = {
        "users": USERS,
        "groups": GROUPS,
        "mcp_servers": [{"id": "ops", "url": ops.url}],
        "approvals": [policy()],
        **changes,
    }
    return make_hub(**settings)


def test_an_approvers_approval_calls_the_tool_once_with_the_edited_arguments(
    make_hub: HubFactory, ops: OpsServer
) -> None:
    hub = approvals_hub(make_hub, ops)
    with Requester(hub.url, "alice", "conv-approve", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        status = alice.until("data-tool-status")
        assert status["data"]["message"] == "Waiting for approval by group ops."
        data = pending["data"]
        assert data["approvers"] == {"users": [], "groups": ["ops"]} and data["expiresAt"].endswith("Z")
        assert data["context"]["requester"] == "alice" and data["context"]["arguments"]["replicas"] == 2
        assert ops.calls == []
        reply = answer(hub.url, "bob", pending["id"], content={"approve": True, "replicas": 3})
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"elicitationId": pending["id"], "outcome": "accepted"}
        rest = alice.rest()
    assert not any(p["type"] == "data-elicitation-request" for p in alice.seen)  # not a question of hers
    resolved = next(p for p in rest if p["type"] == "data-elicitation-resolved")
    assert resolved["data"] == {
        "type": "elicitation-resolved",
        "elicitationId": pending["id"],
        "outcome": "accepted",
        "answeredBy": "bob",
    }
    assert tool_output(rest) == ("Restarted orders with 3 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 3}]


FREEZE = "not during the freeze"


@pytest.mark.parametrize(
    ("action", "content", "why", "words"),
    [
        ("accept", {"approve": False, "reason": FREEZE}, f"denied by bob: {FREEZE}", FREEZE),
        ("accept", {"approve": False}, "denied by bob", ""),
        ("decline", None, "declined by bob", ""),
        ("decline", {"reason": FREEZE, "approve": True}, f"declined by bob: {FREEZE}", FREEZE),
        ("cancel", None, "cancelled by bob", ""),
    ],
    ids=["denied-saying-why", "denied", "declined", "declined-saying-why", "cancelled"],
)
def test_a_denial_calls_nothing_the_tool_says_why_and_the_audit_keeps_the_approvers_words_alone(
    make_hub: HubFactory, ops: OpsServer, action: str, content: dict[str, Any] | None, why: str, words: str
) -> None:
    hub = approvals_hub(make_hub, ops, admins=["dave"])
    with Requester(hub.url, "alice", f"conv-deny-{action}", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        assert answer(hub.url, "bob", pending["id"], action, content).status_code == 200
        rest = alice.rest()
    assert tool_output(rest) == (f"Call of ops.restart was not approved: {why}", True)
    assert ops.calls == []
    record = audit_record(hub.url, pending["id"])
    assert record["reason"] == words and record["answeredBy"] == "bob"
    assert record["outcome"] == ("cancelled" if action == "cancel" else "denied")


def test_the_first_answer_wins_and_a_second_approvers_is_409(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = approvals_hub(make_hub, ops)
    with Requester(hub.url, "alice", "conv-second", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        assert answer(hub.url, "carol", pending["id"], content={"approve": True}).status_code == 200
        second = answer(hub.url, "bob", pending["id"], content={"approve": True})
        assert second.status_code == 409 and second.json()["error"]["code"] == "already_resolved"
        again = answer(hub.url, "carol", pending["id"], content={"approve": True})
        assert again.status_code == 200  # the same answer from the same approver: idempotent
        rest = alice.rest()
    assert next(p for p in rest if p["type"] == "data-elicitation-resolved")["data"]["answeredBy"] == "carol"
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def test_anyone_but_an_approver_finds_no_such_question(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = approvals_hub(make_hub, ops)
    with Requester(hub.url, "alice", "conv-stranger", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        for user in ("dave", "alice"):  # not an approver; the requester, not an approver either
            refused = answer(hub.url, user, pending["id"], content={"approve": True})
            assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
        unknown = answer(hub.url, "bob", "eli_unknown", content={"approve": True})
        assert unknown.status_code == 404
        with_conversation = answer(hub.url, "bob", pending["id"], content={"approve": True})
        assert with_conversation.status_code == 200  # still open after all of those
        alice.rest()
    assert len(ops.calls) == 1


def test_a_requester_who_is_an_approver_is_refused_403_without_self_approval(
    make_hub: HubFactory, ops: OpsServer
) -> None:
    hub = approvals_hub(make_hub, ops, groups={"ops": ["alice", "bob"]})
    with Requester(hub.url, "alice", "conv-self", RESTART) as alice:
        pending = alice.until("data-approval-pending")  # not hers to answer
        refused = answer(hub.url, "alice", pending["id"], content={"approve": True})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "self_approval"
        assert answer(hub.url, "bob", pending["id"], content={"approve": False}).status_code == 200
        rest = alice.rest()
    assert tool_output(rest)[1] and ops.calls == []


def test_with_self_approval_the_requester_is_asked_as_any_question_and_may_approve(
    make_hub: HubFactory, ops: OpsServer
) -> None:
    hub = approvals_hub(make_hub, ops, groups={"ops": ["alice", "bob"]}, approvals=[policy(self_approval=True)])
    with Requester(hub.url, "alice", "conv-self-ok", RESTART) as alice:
        request = alice.until("data-elicitation-request")
        assert request["data"]["context"]["trigger"] == "approval"
        assert request["data"]["requestedSchema"]["properties"]["replicas"]["default"] == 2
        assert answer(hub.url, "alice", request["id"], content={"approve": True}).status_code == 200
        rest = alice.rest()
    assert not any(p["type"] == "data-approval-pending" for p in alice.seen)
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)


def test_the_requester_approves_when_the_policy_names_no_approvers(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = approvals_hub(make_hub, ops, approvals=[{"tools": ["ops.restart"]}])
    with Requester(hub.url, "alice", "conv-requester", RESTART) as alice:
        request = alice.until("data-elicitation-request")
        assert list(request["data"]["requestedSchema"]["properties"]) == ["approve", "reason"]
        assert answer(hub.url, "bob", request["id"], content={"approve": True}).status_code == 404
        assert answer(hub.url, "alice", request["id"], content={"approve": True}).status_code == 200
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)


def test_an_edit_the_tools_schema_refuses_is_422_naming_the_field_and_the_approval_stays_open(
    make_hub: HubFactory, ops: OpsServer
) -> None:
    hub = approvals_hub(make_hub, ops)
    with Requester(hub.url, "alice", "conv-bad-edit", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        bad = answer(hub.url, "bob", pending["id"], content={"approve": True, "replicas": 99})
        assert bad.status_code == 422, bad.text
        assert [f["field"] for f in bad.json()["error"]["fields"]] == ["replicas"]
        wrong_type = answer(hub.url, "bob", pending["id"], content={"approve": True, "replicas": "many"})
        assert wrong_type.status_code == 422
        assert answer(hub.url, "carol", pending["id"], content={"approve": True, "replicas": 10}).status_code == 200
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 10 replicas.", False)
    assert ops.calls == [{"service": "orders", "replicas": 10}]


def test_a_tool_no_policy_names_is_called_at_once(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = approvals_hub(make_hub, ops, approvals=[policy(tools=["ops.stop"])])
    with Requester(hub.url, "alice", "conv-unpoliced", RESTART) as alice:
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 2 replicas.", False)
    assert not any(p["type"].startswith("data-") for p in rest)


def test_without_a_signed_in_requester_a_call_that_needs_approval_is_refused(
    make_hub: HubFactory, ops: OpsServer
) -> None:
    hub = approvals_hub(make_hub, ops)
    with hub.client(None) as anonymous:
        with anonymous.stream("POST", "/run/api/chat", json=ui_body("conv-anon", RESTART)) as response:
            parts = list(sse_data(response))
    text, failed = tool_output(parts)
    assert failed and "needs approval" in text and ops.calls == []


@pytest.mark.parametrize(
    ("on_timeout", "expected", "calls"),
    [
        ("deny", ("Call of ops.restart was not approved: nobody answered within 0.5 s", True), 0),
        ("cancel", ("Call of ops.restart was not approved: nobody answered within 0.5 s; it was cancelled", True), 0),
        ("approve", ("Restarted orders with 2 replicas.", False), 1),
    ],
)
def test_an_approval_nobody_answers_ends_as_on_timeout_says(
    make_hub: HubFactory, ops: OpsServer, on_timeout: str, expected: tuple[str, bool], calls: int
) -> None:
    hub = approvals_hub(
        make_hub, ops, approvals=[policy(timeout_s=0.5, on_timeout=on_timeout)], store={"heartbeat_s": 0.2}
    )
    with Requester(hub.url, "alice", f"conv-timeout-{on_timeout}", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        rest = alice.rest()  # the hub's sweep expires it
    resolved = next(p for p in rest if p["type"] == "data-elicitation-resolved")
    assert resolved["data"] == {"type": "elicitation-resolved", "elicitationId": pending["id"], "outcome": "expired"}
    assert tool_output(rest) == expected
    assert len(ops.calls) == calls


def test_the_openai_compatible_stream_carries_the_wait_and_who_answered(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = approvals_hub(make_hub, ops)
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": RESTART}]}
    with person(hub.url, "alice") as alice, alice.stream("POST", "/run/v1/chat/completions", json=body) as response:
        contents = (c["choices"][0]["delta"].get("content") for c in sse_data(response) if c["choices"])
        events = (json.loads(c) if c.startswith("{") else c for c in contents if c)
        pending = next(e for e in events if isinstance(e, dict))
        assert pending["type"] == "approval-pending" and pending["approvers"] == {"users": [], "groups": ["ops"]}
        assert answer(hub.url, "carol", pending["elicitationId"], content={"approve": True}).status_code == 200
        rest = list(events)
    assert rest[0] == {
        "type": "elicitation-resolved",
        "elicitationId": pending["elicitationId"],
        "outcome": "accepted",
        "answeredBy": "carol",
    }
    assert "".join(e for e in rest if isinstance(e, str)) == "Restarted orders with 2 replicas."


class Heard:
    """An approval listener that keeps what it was told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str, People | str | None]] = []

    async def added(self, elicitation: Elicitation, to: People) -> None:
        self.told.append(("added", elicitation.id, to))

    async def reminded(self, elicitation: Elicitation, to: People) -> None:
        self.told.append(("reminded", elicitation.id, to))

    async def escalated(self, elicitation: Elicitation, to: People) -> None:
        self.told.append(("escalated", elicitation.id, to))

    async def ended(self, elicitation: Elicitation) -> None:
        self.told.append(("ended", elicitation.id, elicitation.answered_by))


def test_listeners_hear_an_approval_added_and_ended_once_and_whom_it_asks(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = approvals_hub(make_hub, ops, approvals=[policy(approvers={"groups": ["ops"], "users": ["dave"]})])
    heard = Heard()
    hub.hub.approval_notices.register(heard)
    with Requester(hub.url, "alice", "conv-heard", RESTART) as alice:
        eid = alice.until("data-approval-pending")["id"]
        assert hub.on_loop(hub.hub.answerable.questions("dave")) == hub.on_loop(hub.hub.answerable.questions("bob"))
        assert [e.id for e in hub.on_loop(hub.hub.answerable.questions("bob"))] == [eid]
        assert hub.on_loop(hub.hub.answerable.questions("alice")) == []  # not hers to answer
        assert answer(hub.url, "dave", eid, content={"approve": True}).status_code == 200
        alice.rest()
    assert heard.told == [("added", eid, People(("dave",), ("ops",))), ("ended", eid, "dave")]
    assert hub.on_loop(hub.hub.answerable.questions("bob")) == []


def test_a_new_message_while_an_approval_waits_cancels_it_the_tool_is_not_called_and_its_end_is_recorded(
    make_hub: HubFactory, ops: OpsServer
) -> None:
    hub = approvals_hub(make_hub, ops)
    with Requester(hub.url, "alice", "conv-moved-on", RESTART) as alice:
        eid = alice.until("data-approval-pending")["id"]
        with Requester(hub.url, "alice", "conv-moved-on", "hello") as again:
            again.rest()
        rest = alice.rest()
    resolved = next(p for p in rest if p["type"] == "data-elicitation-resolved")
    assert resolved["data"]["outcome"] == "cancelled"
    assert answer(hub.url, "bob", eid, content={"approve": True}).status_code == 409
    assert ops.calls == []
    # Its run never goes on (it was stopped): a sweep, on any hub, records its end.
    hub.on_loop(hub.hub.approval_ends.sweep())
    [record] = hub.on_loop(hub.hub.audit.read(Filters(), 10))[0]
    assert record["outcome"] == "cancelled" and record["reason"] == ""  # nobody's words: the outcome says it
    assert_shaped(record, ApprovalRecord)
    assert next(iter(record)) == "elicitationId"  # a page's cursor starts with it


def test_a_policy_on_an_a2a_agent_asks_before_its_message_is_sent(make_hub: HubFactory) -> None:
    agent = AgentProcess()
    try:
        hub = make_hub(
            users=USERS,
            a2a_agents=[agent_entry(agent)],
            approvals=[{"tools": ["travel.send_message"], "approvers": {"users": ["bob"]}}],
        )
        said = '/call travel.send_message {"message": "hello there"}'
        with Requester(hub.url, "alice", "conv-a2a-denied", said) as alice:
            pending = alice.until("data-approval-pending")
            assert pending["data"]["approvers"] == {"users": ["bob"], "groups": []}
            assert answer(hub.url, "bob", pending["id"], "decline").status_code == 200
            assert tool_output(alice.rest()) == ("Call of travel.send_message was not approved: declined by bob", True)
        assert agent.calls() == []
        with Requester(hub.url, "alice", "conv-a2a-approved", said) as alice:
            pending = alice.until("data-approval-pending")
            assert answer(hub.url, "bob", pending["id"], content={"approve": True}).status_code == 200
            assert tool_output(alice.rest()) == ("You said: hello there", False)
        assert len(agent.calls()) == 1
    finally:
        agent.kill()


def test_what_is_noted_of_an_approvals_end_is_kept_no_longer_than_its_conversation(
    make_hub: HubFactory, ops: OpsServer
) -> None:
    hub = approvals_hub(make_hub, ops, elicitation={"timeout_s": 60}, conversations={"retention_s": 600})
    with Requester(hub.url, "alice", "conv-noted", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        [noted] = hub.on_loop(hub.hub.backend.kv.entries("approvals-open", 10))
        assert noted.value == pending["id"]
        # Past its deadline, as long as its conversation is kept (not the day an ended question is kept at most).
        assert noted.expires_ms / 1000 - time.time() <= 60 + 600
        assert answer(hub.url, "bob", pending["id"], content={"approve": True}).status_code == 200
        assert tool_output(alice.rest()) == ("Restarted orders with 2 replicas.", False)
