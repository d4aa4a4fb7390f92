"""The inbox through its public contract, against a real hub and a real SDK MCP server: `GET /run/api/inbox` lists
what each person can answer (their own runs' questions, the approvals routed to them), and
`GET /run/api/inbox/stream` adds and removes them as they come and end, resumes after `Last-Event-ID`, and tells
those an approval escalates to; an OIDC person's groups count."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from elicithub.server.identity import SESSION_COOKIE
from tests.auth.oidc_provider import OidcProvider, oidc_provider
from tests.auth.test_oidc_sign_in import sign_in
from tests.conftest import HubFactory, McpProcess, RunningHub, free_port
from tests.surfaces.pages.inboxes import KEEPALIVE_S, InboxStream, listed
from tests.triggers.approving import (
    GROUPS,
    PEOPLE,
    RESTART,
    USERS,
    OpsServer,
    Requester,
    answer,
    audit_record,
    policy,
    tool_output,
)

PROVISION = '/call mrtr.provision {"name": "orders"}'
ENDED = {"type": "inbox-removed", "outcome": "accepted"}


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


InboxHub = Callable[..., RunningHub]


@pytest.fixture
def inbox_hub(make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess) -> InboxHub:
    """Hubs whose `ops.*` calls need approval (`policies`; by default by the group ops: bob and carol), with the
    mrtr server's questions as well."""

    def make(*policies: dict[str, Any], port: int | None = None, **changes: Any) -> RunningHub:
        settings: dict[str, Any] = {
            "users": USERS,
            "groups": GROUPS,
            "mcp_servers": [{"id": "ops", "url": ops.url}, {"id": "mrtr", "url": mrtr_server.url}],
            "approvals": list(policies) or [policy()],
            "streams": {"keepalive_s": KEEPALIVE_S},
            **changes,
        }
        return make_hub(port, **settings)

    return make


@pytest.fixture
def hub(inbox_hub: InboxHub) -> RunningHub:
    return inbox_hub()


def test_each_person_lists_their_own_questions_and_the_approvals_routed_to_them(hub: RunningHub) -> None:
    with (
        Requester(hub.url, "alice", "conv-own", PROVISION) as own,
        Requester(hub.url, "alice", "conv-restart", RESTART) as restart,
    ):
        question = own.until("data-elicitation-request")["data"]
        approval = restart.until("data-approval-pending")["data"]

        [mine] = listed(hub.url, PEOPLE["alice"])  # not the approval: she is no approver of her own call
        assert mine == {
            "elicitationId": question["elicitationId"],
            "conversationId": "conv-own",
            "message": question["message"],
            "mode": "form",
            "requestedSchema": question["requestedSchema"],
            "context": question["context"],
            "createdAt": mine["createdAt"],
            "expiresAt": question["expiresAt"],
        }
        assert mine["createdAt"].endswith("Z") and mine["createdAt"] <= mine["expiresAt"]

        for approver in ("bob", "carol"):
            [routed] = listed(hub.url, PEOPLE[approver])
            assert "conversationId" not in routed  # the requester's conversation is not theirs
            assert routed["elicitationId"] == approval["elicitationId"]
            assert routed["message"] == "alice asks to call ops.restart. Approve this call?"
            assert routed["context"] == {
                "trigger": "approval",
                "serverId": "ops",
                "toolName": "restart",
                "arguments": {"service": "orders", "replicas": 2},
                "requester": "alice",
            }
            assert set(routed["requestedSchema"]["properties"]) == {"approve", "reason", "service", "replicas"}
            assert routed["expiresAt"] == approval["expiresAt"]
        assert listed(hub.url, PEOPLE["dave"]) == []  # a stranger sees nothing of anyone's

        # The approval ends: it leaves every list; alice's own question is still hers.
        assert answer(hub.url, "carol", approval["elicitationId"], content={"approve": False}).status_code == 200
        assert tool_output(restart.rest()) == ("Call of ops.restart was not approved: denied by carol", True)
        assert listed(hub.url, PEOPLE["carol"]) == []
        assert [q["elicitationId"] for q in listed(hub.url, PEOPLE["alice"])] == [question["elicitationId"]]


def test_an_approval_answered_as_the_inbox_page_answers_keeps_the_approvers_words_alone_in_the_audit(
    inbox_hub: InboxHub,
) -> None:
    hub = inbox_hub(admins=["dave"])
    with Requester(hub.url, "alice", "conv-page", RESTART) as restart:
        restart.until("data-approval-pending")
        [routed] = listed(hub.url, PEOPLE["carol"])
        # What /inbox's script sends: the answer endpoint, with carol's session cookie, from the hub's own origin.
        cookies = {SESSION_COOKIE: hub.hub.identity.session_token("carol")}
        denial = {"approve": False, "reason": "over budget"}
        body = {"elicitationId": routed["elicitationId"], "action": "accept", "content": denial}
        with httpx.Client(base_url=hub.url, cookies=cookies, headers={"origin": hub.url}, timeout=30) as page:
            assert page.post("/run/api/elicitation-responses", json=body).status_code == 200
        refusal = "Call of ops.restart was not approved: denied by carol: over budget"
        assert tool_output(restart.rest()) == (refusal, True)
    record = audit_record(hub.url, routed["elicitationId"])
    assert (record["answeredBy"], record["outcome"], record["reason"]) == ("carol", "denied", "over budget")


def test_the_list_is_newest_first(hub: RunningHub) -> None:
    with (
        Requester(hub.url, "alice", "conv-first", RESTART) as first,
        Requester(hub.url, "dave", "conv-second", RESTART) as second,
    ):
        older = first.until("data-approval-pending")["id"]
        newer = second.until("data-approval-pending")["id"]
        assert [q["elicitationId"] for q in listed(hub.url, PEOPLE["bob"])] == [newer, older]
        requesters = [q["context"]["requester"] for q in listed(hub.url, PEOPLE["carol"])]
        assert requesters == ["dave", "alice"]


def test_no_one_signed_in_gets_401_and_no_stream(hub: RunningHub) -> None:
    with httpx.Client(base_url=hub.url, timeout=30) as client:
        for path in ("/run/api/inbox", "/run/api/inbox/stream"):
            refused = client.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["content-type"] == "application/json"
            assert refused.json()["error"]["code"] == "unauthorized"
            wrong = client.get(path, headers={"authorization": "Bearer not-a-token"})
            assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
        page = client.get("/inbox")  # the page itself is for anyone; it tells them to sign in
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_the_stream_adds_an_approval_for_its_approvers_and_removes_it_when_answered(hub: RunningHub) -> None:
    with (
        InboxStream(hub.url, PEOPLE["carol"]) as carol,
        InboxStream(hub.url, PEOPLE["bob"]) as bob,
        InboxStream(hub.url, PEOPLE["alice"]) as alice,
        InboxStream(hub.url, PEOPLE["dave"]) as dave,
    ):
        for stream in (carol, bob, alice, dave):
            assert stream.started() == []
        with Requester(hub.url, "alice", "conv-live", RESTART) as restart:
            eid = restart.until("data-approval-pending")["id"]
            for approver in (carol, bob):
                event_id, added = approver.next()
                assert event_id.isdigit()
                assert added == {"type": "inbox-added", **listed(hub.url, PEOPLE["carol"])[0]}
                assert added["elicitationId"] == eid and added["context"]["requester"] == "alice"
            assert answer(hub.url, "bob", eid, content={"approve": True}).status_code == 200
            restart.rest()
        for approver in (carol, bob):
            _, removed = approver.next()
            assert removed == {**ENDED, "elicitationId": eid, "answeredBy": "bob"}

        # Neither the requester (no approver) nor a stranger heard of it: the next event each gets is their own.
        with Requester(hub.url, "alice", "conv-alice", PROVISION) as asked_alice:
            own = asked_alice.until("data-elicitation-request")["data"]["elicitationId"]
            _, first = alice.next()
            assert first["type"] == "inbox-added" and first["elicitationId"] == own
            assert first["conversationId"] == "conv-alice"
            with Requester(hub.url, "dave", "conv-dave", PROVISION) as asked_dave:
                dave_own = asked_dave.until("data-elicitation-request")["data"]["elicitationId"]
                _, first = dave.next()
                assert first["type"] == "inbox-added" and first["elicitationId"] == dave_own
        # Their chats closed: the hub cancelled nothing (a durable store keeps them open); carol has none of these.
        assert {q["elicitationId"] for q in listed(hub.url, PEOPLE["carol"])} == set()


def test_a_stream_that_resumes_after_last_event_id_gets_what_it_missed(hub: RunningHub) -> None:
    with InboxStream(hub.url, PEOPLE["carol"]) as carol:
        assert carol.started() == []
        with Requester(hub.url, "alice", "conv-one", RESTART) as one:
            first = one.until("data-approval-pending")["id"]
            assert carol.until("inbox-added")["elicitationId"] == first
            resume_at = carol.last_id
            # Carol is away: the first is answered, a second is asked.
            assert answer(hub.url, "bob", first, content={"approve": True}).status_code == 200
            one.rest()
    with Requester(hub.url, "dave", "conv-two", RESTART) as two:
        second = two.until("data-approval-pending")["id"]
        with InboxStream(hub.url, PEOPLE["carol"], last_event_id=resume_at) as back:
            _, removed = back.next()
            assert removed["type"] == "inbox-removed" and removed["elicitationId"] == first
            _, added = back.next()
            assert added["type"] == "inbox-added" and added["elicitationId"] == second
            assert int(back.last_id) > int(resume_at)
        # An id the hub did not give (or one past the log's end) starts over: reset, then the list.
        for unknown in ("conv:3", "999999999", "-1"):
            with InboxStream(hub.url, PEOPLE["carol"], last_event_id=unknown) as again:
                assert [e["elicitationId"] for e in again.started()] == [second]
        assert answer(hub.url, "carol", second, "decline").status_code == 200
        two.rest()


def test_a_question_that_expires_or_is_cancelled_leaves_the_inbox(inbox_hub: InboxHub) -> None:
    running = inbox_hub(policy(timeout_s=1))
    with InboxStream(running.url, PEOPLE["carol"]) as carol, InboxStream(running.url, PEOPLE["alice"]) as alice:
        assert carol.started() == [] and alice.started() == []
        with Requester(running.url, "alice", "conv-late", RESTART) as late:
            eid = late.until("data-approval-pending")["id"]
            assert carol.until("inbox-added")["elicitationId"] == eid
            removed = carol.until("inbox-removed")
            assert removed == {"type": "inbox-removed", "elicitationId": eid, "outcome": "expired"}
            assert tool_output(late.rest())[0] == "Call of ops.restart was not approved: nobody answered within 1 s"
        with Requester(running.url, "alice", "conv-cancel", PROVISION) as asked:
            own = asked.until("data-elicitation-request")["data"]["elicitationId"]
            assert alice.until("inbox-added")["elicitationId"] == own
        # A new message in the conversation cancels its open question.
        with Requester(running.url, "alice", "conv-cancel", "never mind") as moved_on:
            removed = alice.until("inbox-removed", own)
            assert removed["outcome"] == "cancelled"
            moved_on.rest()


def test_an_escalation_adds_the_approval_to_the_inbox_of_those_it_escalates_to(inbox_hub: InboxHub) -> None:
    escalating = policy(escalate_after_s=1, escalate_to={"users": ["dave", "carol"]})
    running = inbox_hub(escalating, store={"url": "memory://", "heartbeat_s": 0.5})
    with InboxStream(running.url, PEOPLE["dave"]) as dave, InboxStream(running.url, PEOPLE["carol"]) as carol:
        assert dave.started() == [] and carol.started() == []
        with Requester(running.url, "alice", "conv-escalate", RESTART) as asked:
            eid = asked.until("data-approval-pending")["id"]
            assert carol.until("inbox-added")["elicitationId"] == eid
            # Dave may answer once it escalates, and is told then (carol, an approver already, is not told twice).
            added = dave.until("inbox-added")
            assert added["elicitationId"] == eid and "conversationId" not in added
            assert [q["elicitationId"] for q in listed(running.url, PEOPLE["dave"])] == [eid]
            assert answer(running.url, "dave", eid, content={"approve": True}).status_code == 200
            for person in (dave, carol):
                _, removed = person.next()
                assert removed == {**ENDED, "elicitationId": eid, "answeredBy": "dave"}
            assert tool_output(asked.rest()) == ("Restarted orders with 2 replicas.", False)


@pytest.fixture
def oidc() -> Iterator[OidcProvider]:
    with oidc_provider() as provider:
        yield provider


def test_an_oidc_person_sees_the_approvals_of_their_providers_groups(inbox_hub: InboxHub, oidc: OidcProvider) -> None:
    port = free_port()
    oidc.provider.register_web_client(f"http://127.0.0.1:{port}/auth/signed-in")
    # A group only the identity provider knows.
    running = inbox_hub(policy(approvers={"groups": ["sre"]}), port=port, auth={"oidc": oidc.config()})
    erin = oidc.provider.mint("erin", groups=["staff", "sre"])
    frank = oidc.provider.mint("frank", groups=["staff"])
    oidc.provider.groups["gina"] = ["sre"]
    with InboxStream(running.url, erin) as erins, httpx.Client(timeout=30) as gina:
        assert erins.started() == []
        assert sign_in(gina, running, oidc, "gina").status_code == 302  # a browser's session: her sign-in's groups
        with Requester(running.url, "alice", "conv-oidc", RESTART) as asked:
            eid = asked.until("data-approval-pending")["id"]
            assert erins.until("inbox-added")["elicitationId"] == eid
            [routed] = listed(running.url, erin)
            assert routed["elicitationId"] == eid and routed["context"]["requester"] == "alice"
            assert [q["elicitationId"] for q in gina.get(f"{running.url}/run/api/inbox").json()["questions"]] == [eid]
            assert listed(running.url, frank) == []
            approved = httpx.post(
                f"{running.url}/run/api/elicitation-responses",
                json={"elicitationId": eid, "action": "accept", "content": {"approve": True}},
                headers={"authorization": f"Bearer {erin}"},
            )
            assert approved.status_code == 200, approved.text
            assert erins.next()[1]["type"] == "inbox-removed"
            assert tool_output(asked.rest()) == ("Restarted orders with 2 replicas.", False)
