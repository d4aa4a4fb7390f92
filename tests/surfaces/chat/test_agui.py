"""`POST /run/agui` read as an AG-UI client reads it (every event validated with `ag-ui-protocol`'s models): each
kind of question the demo asks ends a run as an interrupt and its resume streams the rest, by AG-UI's contract
rules (DESIGN.md v4, "AG-UI")."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    AssistantMessage,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from elicithub.core.elicitation import State
from elicithub.demo.deploy import DEPLOY_FORM
from elicithub.runtime.conversations import Caller
from tests.auth.conftest import Browser
from tests.conftest import HubFactory, RunningHub, eventually
from tests.surfaces.chat.agui_stream import cancelled, interrupts, kinds, resolved, run, run_input, text
from tests.triggers.approving import audit_record

DEPLOY = '/call deploy.deploy_service {"service": "orders"}'
PROVISION = '/call mrtr.provision {"name": "agent"}'
BOOK = "/call travel.send_message " + json.dumps({"message": "Lisbon on Friday"})


@pytest.fixture
def demo_hub(make_hub: HubFactory) -> RunningHub:
    """The demo, whose rollback policy has its dev user (here alice) approve their own calls; bob reads the audit."""
    return make_hub(demo={"enabled": True, "dev_user": "alice"}, admins=["bob"])


def started_call(events: list[Any]) -> ToolCallStartEvent:
    [start] = [e for e in events if isinstance(e, ToolCallStartEvent)]
    return start


def result_of(events: list[Any]) -> ToolCallResultEvent:
    [result] = [e for e in events if isinstance(e, ToolCallResultEvent)]
    return result


def succeeded(events: list[Any]) -> bool:
    last = events[-1]
    return isinstance(last, RunFinishedEvent) and isinstance(last.outcome, RunFinishedSuccessOutcome)


def error_of(events: list[Any]) -> RunErrorEvent:
    assert kinds(events) == ["RUN_STARTED", "RUN_ERROR"], kinds(events)
    error = events[-1]
    assert isinstance(error, RunErrorEvent)
    return error


# -- every kind of question the demo asks


FORMS = [
    pytest.param(
        DEPLOY,
        "input_required",
        {"region": "eu-west-1", "confirm": True},
        "Deployed orders to eu-west-1 with 2 replicas.",
        ("mcp_elicitation", "deploy.deploy_service"),
        id="mcp-2026-07-28-form",
    ),
    pytest.param(
        '/call deploy.migrate {"database": "orders-db"}',
        "input_required",
        {"apply": True},
        "Migrated orders-db: 3 migrations applied.",
        ("mcp_elicitation", "deploy.migrate"),
        id="mcp-task-form",
    ),
    pytest.param(
        BOOK,
        "input_required",
        {"answer": "Porto"},
        "Booked a flight from Porto for: Lisbon on Friday.",
        ("a2a_input_required", "travel.send_message"),
        id="a2a-input-required",
    ),
    pytest.param(
        "/call planner.delegate " + json.dumps({"message": BOOK}),
        "input_required",
        {"answer": "Porto"},
        "Booked a flight from Porto for: Lisbon on Friday.",
        ("a2a_input_required", "planner.delegate"),
        id="delegation",
    ),
]


@pytest.mark.parametrize(("command", "reason", "payload", "result", "asked"), FORMS)
def test_a_demo_question_ends_the_run_as_an_interrupt_and_its_resume_streams_the_call_result(
    demo_hub: RunningHub, command: str, reason: str, payload: dict[str, Any], result: str, asked: tuple[str, str]
) -> None:
    thread = f"agui-{asked[1]}"
    first = run(demo_hub, run_input(thread, command))

    call = started_call(first)
    assert f"{call.tool_call_name}" == asked[1]  # the paused call: for a delegation, the delegating one
    assert kinds(first)[-2:] == ["MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    [asking] = interrupts(first)
    assert asking.reason == reason and asking.tool_call_id == call.tool_call_id
    assert asking.response_schema is not None and asking.response_schema["type"] == "object"
    assert asking.metadata is not None and asking.metadata["context"]["trigger"] == asked[0]
    assert asking.expires_at is not None and asking.expires_at.endswith("Z")
    assert asking.id.startswith("eli_")
    snapshot = first[-2]
    assert isinstance(snapshot, MessagesSnapshotEvent)
    paused = snapshot.messages[-1]
    assert isinstance(paused, AssistantMessage) and paused.tool_calls is not None
    assert [c.id for c in paused.tool_calls] == [call.tool_call_id]

    rest = run(demo_hub, run_input(thread, resume=[resolved(asking.id, payload)]))

    assert "TOOL_CALL_START" not in kinds(rest)  # the call goes on: its result comes against the original id
    done = result_of(rest)
    assert done.tool_call_id == call.tool_call_id and done.content == result
    assert text(rest) == result and succeeded(rest)


ROLLBACK = '/call release.rollback {"service": "orders"}'


def test_the_demo_rollback_is_a_tool_call_interrupt_for_its_approval_then_an_input_required_one_for_its_form(
    demo_hub: RunningHub,
) -> None:
    first = run(demo_hub, run_input("agui-rollback", ROLLBACK))

    call = started_call(first)
    [approval] = interrupts(first)
    assert approval.reason == "tool_call" and approval.tool_call_id == call.tool_call_id
    assert approval.message == "alice asks to call release.rollback. Approve this call?"
    assert approval.response_schema is not None and approval.response_schema["properties"]["approved"] == {
        "type": "boolean"
    }
    assert approval.metadata is not None and approval.metadata["context"]["trigger"] == "approval"

    second = run(demo_hub, run_input("agui-rollback", resume=[resolved(approval.id, {"approved": True})]))

    [form] = interrupts(second)  # approved: the tool is called, and the release server asks its own question
    assert form.reason == "input_required" and form.tool_call_id == call.tool_call_id
    assert form.metadata is not None and form.metadata["context"]["trigger"] == "mcp_elicitation"
    assert "TOOL_CALL_START" not in kinds(second)

    rest = run(demo_hub, run_input("agui-rollback", resume=[resolved(form.id, {"confirm": True, "reason": "bad"})]))

    assert result_of(rest).tool_call_id == call.tool_call_id
    assert result_of(rest).content == "Rolled orders back to the previous release. Reason: bad"
    assert demo_hub.run_ended(approval.id)[0].answered_by == "alice"


def test_a_denied_approval_refuses_the_call_with_its_reason_and_the_audit_keeps_the_reason_alone(
    demo_hub: RunningHub,
) -> None:
    [approval] = interrupts(run(demo_hub, run_input("agui-deny", ROLLBACK)))

    denied = resolved(approval.id, {"approved": False, "reason": "not during the sale"})
    rest = run(demo_hub, run_input("agui-deny", resume=[denied]))

    assert result_of(rest).content == (
        "Call of release.rollback was not approved: denied by alice: not during the sale"
    )
    assert succeeded(rest)
    record = audit_record(demo_hub.url, approval.id, admin="bob")
    assert (record["answeredBy"], record["outcome"], record["reason"]) == ("alice", "denied", "not during the sale")


def test_the_deploy_form_is_its_schema_and_declining_it_deploys_nothing(demo_hub: RunningHub) -> None:
    [asking] = interrupts(run(demo_hub, run_input("agui-decline", DEPLOY)))
    assert asking.response_schema == DEPLOY_FORM
    assert asking.message == "How should orders be deployed?"
    context = {"trigger": "mcp_elicitation", "serverId": "deploy", "toolName": "deploy_service"}
    assert asking.metadata == {"context": context}

    rest = run(demo_hub, run_input("agui-decline", resume=[resolved(asking.id, {"action": "decline"})]))

    assert result_of(rest).content == "The deploy of orders was cancelled; nothing was deployed."
    assert demo_hub.run_ended(asking.id)[0].state is State.DECLINED


def test_a_cancelled_interrupt_cancels_its_question(demo_hub: RunningHub) -> None:
    [asking] = interrupts(run(demo_hub, run_input("agui-cancel", DEPLOY)))

    rest = run(demo_hub, run_input("agui-cancel", resume=[cancelled(asking.id)]))

    assert succeeded(rest) and "TOOL_CALL_RESULT" in kinds(rest)
    assert demo_hub.run_ended(asking.id)[0].state is State.CANCELLED


def test_a_sign_in_is_a_url_interrupt_resumed_once_signed_in(demo_hub: RunningHub) -> None:
    first = run(demo_hub, run_input("agui-sign-in", "/call tracker.list_issues {}"))
    [asking] = interrupts(first)
    assert asking.reason == "elicithub:sign_in" and asking.response_schema is None
    assert asking.tool_call_id == started_call(first).tool_call_id
    assert asking.metadata is not None and asking.metadata["context"]["trigger"] == "credential_required"
    url = asking.metadata["url"]
    assert url.startswith(f"{demo_hub.url}/auth/connect?")
    browser = Browser("alice")
    try:
        assert "Connected" in browser.sign_in(url).text
    finally:
        browser.close()

    rest = run(demo_hub, run_input("agui-sign-in", resume=[resolved(asking.id)]))

    assert result_of(rest).content.startswith("You have 3 issues:") and succeeded(rest)


def test_a_sign_in_resolved_before_the_person_signs_in_streams_the_result_once_they_do(demo_hub: RunningHub) -> None:
    # `resolved` says the person agreed to sign in; the hub's sign-in ends when theirs completes (as MCP's url-mode
    # `accept` does on the hub's MCP surface), so the resumed stream waits for it rather than failing the call.
    [asking] = interrupts(run(demo_hub, run_input("agui-sign-in-first", "/call tracker.list_issues {}")))
    assert asking.metadata is not None
    readers = demo_hub.hub.conversations.readers("chat")
    resumed: list[list[Any]] = []
    resuming = threading.Thread(
        target=lambda: resumed.append(run(demo_hub, run_input("agui-sign-in-first", resume=[resolved(asking.id)])))
    )
    resuming.start()
    try:
        eventually(lambda: demo_hub.hub.conversations.readers("chat") > readers, "the resume never followed the run")
        browser = Browser("alice")
        try:
            assert "Connected" in browser.sign_in(asking.metadata["url"]).text
        finally:
            browser.close()
    finally:
        resuming.join(timeout=60)

    [rest] = resumed
    assert result_of(rest).content.startswith("You have 3 issues:") and succeeded(rest)


# -- several interrupts, and AG-UI's contract rules (the test MCP server's tools)


def test_one_call_asking_two_questions_gives_two_interrupts_resumed_by_one_resume(hub: RunningHub) -> None:
    first = run(hub, run_input("agui-two", '/call mrtr.deploy {"name": "orders"}'))
    both = interrupts(first)
    assert [i.message for i in both] == ["Which region?", "Deploy orders?"]
    assert {i.tool_call_id for i in both} == {started_call(first).tool_call_id}

    region, confirm = (i.id for i in both)
    answers = [resolved(region, {"region": "eu-west-1"}), resolved(confirm, {"confirm": True})]
    rest = run(hub, run_input("agui-two", resume=answers))

    assert result_of(rest).content == "Deployed orders to eu-west-1." and succeeded(rest)


def test_a_resume_that_leaves_an_interrupt_out_is_resume_incomplete_and_takes_nothing(hub: RunningHub) -> None:
    region, confirm = (i.id for i in interrupts(run(hub, run_input("agui-part", '/call mrtr.deploy {"name": "db"}'))))

    error = error_of(run(hub, run_input("agui-part", resume=[resolved(region, {"region": "eu-west-1"})])))

    assert error.code == "resume_incomplete" and confirm in error.message
    pending = hub.on_loop(hub.hub.store.get(region))
    assert pending is not None and pending.state is State.PENDING


def test_a_payload_that_fails_the_schema_is_invalid_payload_and_the_interrupt_stays_open(hub: RunningHub) -> None:
    [asking] = interrupts(run(hub, run_input("agui-bad", '/call mrtr.provision {"name": "bad"}')))

    error = error_of(run(hub, run_input("agui-bad", resume=[resolved(asking.id, {"region": "mars"})])))
    assert error.code == "invalid_payload" and "region" in error.message
    error = error_of(run(hub, run_input("agui-bad", resume=[resolved(asking.id)])))
    assert error.code == "invalid_payload" and "payload" in error.message

    rest = run(hub, run_input("agui-bad", resume=[resolved(asking.id, {"region": "us-east-1"})]))
    assert result_of(rest).content == "Provisioned bad in us-east-1."


@pytest.mark.parametrize(
    ("region_payload", "region_error"),
    [({"region": "mars"}, "region: "), (None, "payload: an object is required")],
    ids=["both-fail-their-schemas", "one-is-no-object"],
)
def test_a_resume_failing_in_two_interrupts_is_one_invalid_payload_naming_every_field_and_takes_nothing(
    hub: RunningHub, region_payload: dict[str, str] | None, region_error: str
) -> None:
    thread = f"agui-bad-two-{region_error[0]}"
    region, confirm = (i.id for i in interrupts(run(hub, run_input(thread, '/call mrtr.deploy {"name": "two"}'))))

    answers = [resolved(region, region_payload), resolved(confirm, {"confirm": "yes"})]
    error = error_of(run(hub, run_input(thread, resume=answers)))

    assert error.code == "invalid_payload"
    assert region_error in error.message and region in error.message  # the first interrupt's field
    assert "confirm: " in error.message and confirm in error.message  # and the second's, in the same message
    for still_open in (region, confirm):
        pending = hub.on_loop(hub.hub.store.get(still_open))
        assert pending is not None and pending.state is State.PENDING
    fixed = [resolved(region, {"region": "eu-west-1"}), resolved(confirm, {"confirm": True})]
    assert result_of(run(hub, run_input(thread, resume=fixed))).content == "Deployed two to eu-west-1."


def test_new_input_while_interrupts_are_open_is_interrupts_pending(hub: RunningHub) -> None:
    [asking] = interrupts(run(hub, run_input("agui-busy", '/call mrtr.provision {"name": "busy"}')))

    error = error_of(run(hub, run_input("agui-busy", "something else")))

    assert error.code == "interrupts_pending" and asking.id in error.message
    pending = hub.on_loop(hub.hub.store.get(asking.id))
    assert pending is not None and pending.state is State.PENDING


def test_an_unknown_interrupt_id_is_unknown_interrupt(hub: RunningHub) -> None:
    interrupts(run(hub, run_input("agui-unknown", '/call mrtr.provision {"name": "unknown"}')))

    error = error_of(run(hub, run_input("agui-unknown", resume=[resolved("eli_nothing", {"region": "us-east-1"})])))

    assert error.code == "unknown_interrupt"


def test_another_users_interrupt_is_unknown_to_them_and_their_thread_of_that_id_is_their_own(hub: RunningHub) -> None:
    [asking] = interrupts(run(hub, run_input("agui-shared-id", '/call mrtr.provision {"name": "mine"}')))

    resume = [resolved(asking.id, {"region": "us-east-1"})]
    error = error_of(run(hub, run_input("agui-shared-id", resume=resume), "bob"))
    assert error.code == "unknown_interrupt"
    theirs = run(hub, run_input("agui-shared-id", '/call legacy.echo {"text": "hi"}'), "bob")
    # Bob's thread of that name is his own: no interrupt of alice's is pending on it.
    assert result_of(theirs).content == "echo: hi" and succeeded(theirs)

    pending = hub.on_loop(hub.hub.store.get(asking.id))
    assert pending is not None and pending.state is State.PENDING


def test_an_expired_interrupt_is_expired(hub: RunningHub) -> None:
    [asking] = interrupts(run(hub, run_input("agui-late", '/call mrtr.provision {"name": "late"}')))
    hub.on_loop(hub.hub.broker.end(asking.id, State.EXPIRED))

    error = error_of(run(hub, run_input("agui-late", resume=[resolved(asking.id, {"region": "us-east-1"})])))

    assert error.code == "expired"


def test_a_replayed_resume_streams_the_same_continuation_and_calls_the_tool_once(hub: RunningHub) -> None:
    [asking] = interrupts(run(hub, run_input("agui-replay", '/call mrtr.provision {"name": "replayed"}')))
    resume = [resolved(asking.id, {"region": "eu-west-1"})]

    once = run(hub, run_input("agui-replay", resume=resume))
    again = run(hub, run_input("agui-replay", resume=resume))

    assert result_of(once).content == result_of(again).content == "Provisioned replayed in eu-west-1."
    assert result_of(once).tool_call_id == result_of(again).tool_call_id == asking.tool_call_id
    assert succeeded(again)
    assert hub.downstream_calls("provision", "replayed") == 2  # asked, then answered: never again


def test_a_thread_without_interrupts_runs_each_message(hub: RunningHub) -> None:
    events = run(hub, run_input("agui-plain", '/call legacy.echo {"text": "hi"}'))

    assert kinds(events)[:4] == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert result_of(events).content == "echo: hi" and text(events) == "echo: hi" and succeeded(events)


def test_a_thread_new_to_the_hub_keeps_the_words_the_client_sent_before_its_message(hub: RunningHub) -> None:
    body = run_input("agui-kept", '/call legacy.echo {"text": "again"}')
    body["messages"] = [
        {"id": "a", "role": "user", "content": [{"type": "text", "text": "earlier"}]},
        {
            "id": "b",
            "role": "assistant",
            "content": "a reply",
            "toolCalls": [{"id": "x", "type": "function", "function": {"name": "t.t", "arguments": "{}"}}],
        },
        {"id": "c", "role": "tool", "toolCallId": "x", "content": "made elsewhere"},
        *body["messages"],
    ]

    assert succeeded(run(hub, body))

    kept = hub.on_loop(hub.hub.conversations.transcript(Caller("alice"), "agui-kept"))
    assert [(m["role"], m["content"]) for m in kept[:3]] == [
        ("user", "earlier"),
        ("assistant", "a reply"),
        ("user", '/call legacy.echo {"text": "again"}'),
    ]


AGENTS = [{"id": "assistant", "tools": ["legacy"]}, {"id": "researcher", "tools": ["mrtr"]}]


def test_the_path_names_the_agent_and_a_name_of_no_agent_runs_the_default_one(make_hub: HubFactory) -> None:
    hub = make_hub(agents=AGENTS)
    echo = '/call legacy.echo {"text": "hi"}'

    researchers = run(hub, run_input("agui-researcher", echo), path="/run/agui/researcher")
    assert "There is no tool legacy.echo" in text(researchers) and succeeded(researchers)
    [asking] = interrupts(run(hub, run_input("agui-researcher-asks", PROVISION), path="/run/agui/researcher"))
    rest = run(hub, run_input("agui-researcher-asks", resume=[resolved(asking.id, {"region": "eu-west-1"})]))
    assert result_of(rest).content == "Provisioned agent in eu-west-1."  # resumed on either path: its run goes on

    for path in ("/run/agui", "/run/agui/assistant", "/run/agui/nobody"):
        defaults = run(hub, run_input(f"agui-default-{path.rsplit('/', 1)[-1]}", echo), path=path)
        assert result_of(defaults).content == "echo: hi" and succeeded(defaults), path


@pytest.mark.parametrize("path", ["/run/agui", "/run/agui/researcher"])
@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token"])
def test_no_or_a_bad_token_is_401_json_and_no_stream(hub: RunningHub, authorization: str | None, path: str) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    response = httpx.post(f"{hub.url}{path}", json=run_input("agui-401", "hi"), headers=headers)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b'{"threadId": "t", "messages": []}', "runId"),
        (b'{"threadId": "t", "runId": "r", "messages": [], "state": NaN}', "NaN"),
        (b"not json", "body"),
        (json.dumps(run_input("a thread id with spaces", "hi")).encode(), "threadId"),
    ],
)
def test_a_body_that_is_not_a_run_agent_input_is_422_and_no_stream(hub: RunningHub, body: bytes, named: str) -> None:
    with hub.client() as client:
        response = client.post("/run/agui", content=body, headers={"content-type": "application/json"})

    assert response.status_code == 422 and named in response.json()["error"]["message"]


def test_an_input_with_no_user_message_last_and_no_resume_is_invalid_payload(hub: RunningHub) -> None:
    error = error_of(run(hub, run_input("agui-empty")))

    assert error.code == "invalid_payload" and "messages" in error.message


def test_a_resume_that_addresses_an_interrupt_twice_is_invalid_payload_and_takes_nothing(hub: RunningHub) -> None:
    [asking] = interrupts(run(hub, run_input("agui-twice", '/call mrtr.provision {"name": "twice"}')))

    twice = [resolved(asking.id, {"region": "us-east-1"}), cancelled(asking.id)]
    error = error_of(run(hub, run_input("agui-twice", resume=twice)))

    assert error.code == "invalid_payload"
    pending = hub.on_loop(hub.hub.store.get(asking.id))
    assert pending is not None and pending.state is State.PENDING
