"""An `approval-responded` tool part answering a native approval on `POST /run/api/chat`: what it answers, and what
it refuses (another person's approval, a question that is no approval of theirs, a malformed part, the option off)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from elicithub.core.events import ToolCallFinished
from tests.conftest import HubFactory, McpProcess, RunningHub, sse_data, sse_numbered
from tests.triggers.approving import USERS, OpsServer, Requester, answer, person, ui_body

RESTART = '/call ops.restart {"service": "orders", "replicas": 2}'


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


def native_hub(make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess, **changes: Any) -> RunningHub:
    settings: dict[str, Any] = {
        "users": USERS,
        "groups": {"ops": ["bob"]},
        "mcp_servers": [{"id": "ops", "url": ops.url}, {"id": "mrtr", "url": mrtr_server.url}],
        "approvals": [
            {"tools": ["ops.*"], "approvers": "requester"},
            {"tools": ["mrtr.later"], "approvers": {"groups": ["ops"]}},
        ],
        "ui_stream": {"native_approvals": True},
        **changes,
    }
    return make_hub(**settings)


def asked(
    url: str, user: str, conversation_id: str, text: str = RESTART
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`user`'s chat up to the end of its stream, which waits on a native approval: its parts, and the request."""
    with person(url, user) as client, client.stream("POST", "/run/api/chat", json=ui_body(conversation_id, text)) as r:
        assert r.status_code == 200, r.read()
        parts = list(sse_data(r))
    return parts, next(p for p in parts if p["type"] == "tool-approval-request")


def responded(conversation_id: str, approval_id: str, approved: bool, **part: Any) -> dict[str, Any]:
    """The next request as AI SDK 6 sends it after `addToolApprovalResponse`: the assistant message, its call's part
    now `approval-responded`."""
    tool = {
        "type": "dynamic-tool",
        "toolName": "ops.restart",
        "toolCallId": "call_1",
        "state": "approval-responded",
        "input": {"service": "orders", "replicas": 2},
        "approval": {"id": approval_id, "approved": approved},
        **part,
    }
    user = ui_body(conversation_id, RESTART)["messages"][0]
    return {"id": conversation_id, "messages": [user, {"id": "msg_a", "role": "assistant", "parts": [tool]}]}


def post(url: str, user: str, body: dict[str, Any]) -> tuple[int, list[dict[str, Any]] | Any]:
    with person(url, user) as client, client.stream("POST", "/run/api/chat", json=body) as r:
        if r.status_code != 200:
            return r.status_code, r.read() and r.json()
        return 200, list(sse_data(r))


def test_an_approval_responded_part_answers_and_the_stream_continues_the_sent_message(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess
) -> None:
    hub = native_hub(make_hub, ops, mrtr_server)
    parts, request = asked(hub.url, "alice", "native-ok")
    assert parts[-1]["type"] == "finish" and ops.calls == []  # the stream ended; the call waits
    status, continued = post(hub.url, "alice", responded("native-ok", request["approvalId"], True))
    assert status == 200
    assert continued[0] == {"type": "start", "messageId": "msg_a"}
    output = next(p for p in continued if p["type"] == "tool-output-available")
    assert output["toolCallId"] == request["toolCallId"] and output["output"] == "Restarted orders with 2 replicas."
    assert ops.calls == [{"service": "orders", "replicas": 2}]
    # Another answer after it is a conflict.
    assert post(hub.url, "alice", responded("native-ok", request["approvalId"], False))[0] == 409
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def test_another_persons_approval_is_not_found_and_stays_open(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess
) -> None:
    hub = native_hub(make_hub, ops, mrtr_server)
    _, request = asked(hub.url, "bob", "native-bob")
    for conversation_id in ("native-bob", "native-alice"):
        status, body = post(hub.url, "alice", responded(conversation_id, request["approvalId"], True))
        assert status == 404, body
    assert ops.calls == []
    status, _ = post(hub.url, "bob", responded("native-bob", request["approvalId"], True))
    assert status == 200 and ops.calls == [{"service": "orders", "replicas": 2}]


def test_an_unknown_approval_is_not_found(make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess) -> None:
    hub = native_hub(make_hub, ops, mrtr_server)
    asked(hub.url, "alice", "native-unknown")
    status, _ = post(hub.url, "alice", responded("native-unknown", "eli_nothing", True))
    assert status == 404


def test_a_question_that_is_not_an_approval_of_theirs_is_not_found_and_stays_open(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess
) -> None:
    hub = native_hub(make_hub, ops, mrtr_server)
    # An ordinary form question of alice's: shown as a data part, the stream open.
    with Requester(hub.url, "alice", "native-form", '/call mrtr.provision {"name": "orders"}') as alice:
        form = alice.until("data-elicitation-request")
        status, _ = post(hub.url, "alice", responded("native-form", form["id"], True))
        assert status == 404
        assert answer(hub.url, "alice", form["id"], content={"region": "eu-west-1"}).status_code == 200
        alice.rest()
    # An approval of alice's call that the group ops answers: she sees that it waits, not a question.
    with Requester(hub.url, "alice", "native-others", '/call mrtr.later {"name": "n1"}') as alice:
        pending = alice.until("data-approval-pending")
        status, _ = post(hub.url, "alice", responded("native-others", pending["id"], True))
        assert status == 404
        assert answer(hub.url, "bob", pending["id"], content={"approve": True}).status_code == 200
        assert any(p["type"] == "tool-output-available" for p in alice.rest())


@pytest.mark.parametrize(
    ("part", "named"),
    [
        ({"approval": None}, "messages[1].parts[0].approval: an object is required"),
        ({"approval": {"approved": True}}, "messages[1].parts[0].approval.id: a non-empty string is required"),
        ({"approval": {"id": "eli_x", "approved": "yes"}}, "messages[1].parts[0].approval.approved: a boolean"),
        ({"approval": {"id": "eli_x", "approved": False, "reason": 3}}, "approval.reason: a string is required"),
        ({"toolCallId": None}, "messages[1].parts[0].toolCallId: a non-empty string is required"),
    ],
)
def test_a_malformed_approval_responded_part_is_422_naming_the_field(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess, part: dict[str, Any], named: str
) -> None:
    hub = native_hub(make_hub, ops, mrtr_server)
    status, body = post(hub.url, "alice", responded("native-bad", "eli_x", True, **part))
    assert status == 422
    assert named in body["error"]["message"]


def test_with_the_option_off_an_assistant_message_last_is_refused_as_before(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess
) -> None:
    hub = native_hub(make_hub, ops, mrtr_server, ui_stream={"native_approvals": False})
    status, body = post(hub.url, "alice", responded("native-off", "eli_x", True))
    assert status == 400
    assert body["error"]["message"] == "messages[1].role: the last message must be from the user."


def test_without_a_user_no_approval_is_answered(make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess) -> None:
    hub = native_hub(make_hub, ops, mrtr_server)
    _, request = asked(hub.url, "alice", "native-anon")
    reply = httpx.post(f"{hub.url}/run/api/chat", json=responded("native-anon", request["approvalId"], True))
    assert reply.status_code == 404
    assert ops.calls == []


def test_the_answer_streams_the_rest_even_while_another_reader_here_follows_the_run(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess
) -> None:
    """The AI SDK's message is only complete with the call's result on the answer's own stream: without it, the part
    stays approval-responded and `sendAutomaticallyWhen` would send the answer again."""
    hub = native_hub(make_hub, ops, mrtr_server)
    with person(hub.url, "alice") as client:
        with client.stream("POST", "/run/api/chat", json=ui_body("native-followed", RESTART)) as r:
            numbered = list(sse_numbered(r))
        event_id, request = next((i, p) for i, p in numbered if p["type"] == "tool-approval-request")
        # A tab that had read up to the approval request reads on from there: it follows the waiting run.
        path = "/run/api/chat/native-followed/stream"
        with client.stream("GET", path, headers={"last-event-id": event_id}) as following:
            assert following.status_code == 200
            while client.get("/healthz").json()["reattachedStreams"] < 1:
                pass  # until the hub counts it (it starts following once its response has begun)
            status, continued = post(hub.url, "alice", responded("native-followed", request["approvalId"], True))
            followed = list(sse_data(following))
    assert status == 200
    assert any(p["type"] == "tool-output-available" for p in continued), continued
    assert any(p["type"] == "tool-output-available" for p in followed)
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def test_an_approval_that_expired_is_410_and_the_call_was_refused(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess
) -> None:
    approvals = [{"tools": ["ops.*"], "approvers": "requester", "timeout_s": 1}]
    hub = native_hub(make_hub, ops, mrtr_server, approvals=approvals)
    _, request = asked(hub.url, "alice", "native-late")
    ended, events = hub.run_ended(request["approvalId"])  # nobody answered in time: on_timeout deny
    assert ended.outcome == "expired"
    [refused] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert refused.text == "Call of ops.restart was not approved: nobody answered within 1 s" and refused.is_error
    status, body = post(hub.url, "alice", responded("native-late", request["approvalId"], True))
    assert status == 410, body
    assert ops.calls == []


def test_a_denial_with_a_reason_is_declined_and_the_refusal_and_the_audit_say_why(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess
) -> None:
    hub = native_hub(make_hub, ops, mrtr_server, admins=["dave"])
    _, request = asked(hub.url, "alice", "native-deny")
    denial = responded("native-deny", request["approvalId"], False)
    denial["messages"][1]["parts"][0]["approval"]["reason"] = "not during the freeze"
    status, continued = post(hub.url, "alice", denial)
    assert status == 200, continued
    resolved = next(p for p in continued if p["type"] == "data-elicitation-resolved")
    assert resolved["data"]["outcome"] == "declined" and resolved["data"]["answeredBy"] == "alice"
    assert any(p["type"] == "tool-output-denied" for p in continued)
    _, events = hub.run_ended(request["approvalId"])
    [refused] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert refused.text == "Call of ops.restart was not approved: declined by alice: not during the freeze"
    assert refused.is_error and ops.calls == []
    with person(hub.url, "dave") as dave:
        [record] = dave.get("/run/api/audit").json()["records"]
    assert record["outcome"] == "denied" and record["answeredBy"] == "alice"
    assert record["reason"] == "not during the freeze"  # her words alone: `answeredBy` and `outcome` say the rest
    # The same denial again is a repeat; a denial with another reason, or none, is a conflict.
    assert post(hub.url, "alice", denial)[0] == 200
    assert post(hub.url, "alice", responded("native-deny", request["approvalId"], False))[0] == 409
    assert ops.calls == []
