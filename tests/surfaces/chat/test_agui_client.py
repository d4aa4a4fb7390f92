"""`POST /run/agui` read by the official AG-UI client (`@ag-ui/client` 1.0.0 `HttpAgent`, pinned in tests/agui):
every kind of question the demo asks reaches it as an interrupt, and it resumes each through its own API
(`buildResumeArray`, `runAgent({resume})`), with no error or warning from the client."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.auth.conftest import Browser
from tests.conftest import HubFactory, RunningHub

AGUI = Path(__file__).resolve().parents[2] / "agui"
BOOK = "/call travel.send_message " + json.dumps({"message": "Lisbon on Friday"})

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (AGUI / "node_modules").exists(),
    reason="needs node and tests/agui/node_modules (./scripts/test runs npm ci there when node is installed)",
)


@pytest.fixture
def demo_hub(make_hub: HubFactory) -> RunningHub:
    """The demo, whose rollback policy has its dev user (here alice) approve their own calls."""
    return make_hub(demo={"enabled": True, "dev_user": "alice"})


def sign_in(interrupt: dict[str, Any]) -> None:
    browser = Browser("alice")
    try:
        assert "Connected" in browser.sign_in(interrupt["metadata"]["url"]).text
    finally:
        browser.close()


def drive(
    hub: RunningHub,
    thread: str,
    message: str,
    payloads: list[Any],
    tools: list[dict[str, Any]] | None = None,
    results: dict[str, str] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """Run `message` in the client, offering `tools`; answer the interrupts of each round with the next of
    `payloads` (None: sign in first, then resolve), and the calls of front-end tools a run leaves with `results`
    (by tool name). What the client said before each answer, and what it ended with."""
    command = ["node", "drive.mjs", hub.url, "alice-secret", thread, message, json.dumps(tools or [])]
    process = subprocess.Popen(command, cwd=AGUI, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    seen = []
    try:
        for line in process.stdout:
            said = json.loads(line)
            if said.get("done"):
                return seen, said
            seen.append(said)
            if "toolCalls" in said:
                answer: dict[str, Any] = {"results": {c["id"]: (results or {})[c["name"]] for c in said["toolCalls"]}}
            else:
                [asked] = said["interrupts"]
                payload = payloads[sum("interrupts" in s for s in seen) - 1]
                if payload is None:
                    sign_in(asked)
                response = {"status": "resolved"} if payload is None else {"status": "resolved", "payload": payload}
                answer = {"responses": {asked["id"]: response}}
            process.stdin.write(json.dumps(answer) + "\n")
            process.stdin.flush()
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    raise AssertionError(f"the client ended without a result (exit {process.returncode})")


CASES = [
    pytest.param(
        '/call deploy.deploy_service {"service": "orders"}',
        {"region": "eu-west-1", "confirm": True},
        "input_required",
        "Deployed orders to eu-west-1 with 2 replicas.",
        id="mcp-2026-07-28-form",
    ),
    pytest.param(
        '/call deploy.migrate {"database": "orders-db"}',
        {"apply": True},
        "input_required",
        "Migrated orders-db: 3 migrations applied.",
        id="mcp-task-form",
    ),
    pytest.param(
        BOOK, {"answer": "Porto"}, "input_required", "Booked a flight from Porto for: Lisbon on Friday.", id="a2a"
    ),
    pytest.param(
        "/call planner.delegate " + json.dumps({"message": BOOK}),
        {"answer": "Porto"},
        "input_required",
        "Booked a flight from Porto for: Lisbon on Friday.",
        id="delegation",
    ),
    pytest.param("/call tracker.list_issues {}", None, "elicithub:sign_in", "You have 3 issues:", id="sign-in"),
]


@pytest.mark.parametrize(("message", "payload", "reason", "result"), CASES)
def test_the_ag_ui_client_sees_each_demo_question_as_an_interrupt_and_resumes_it(
    demo_hub: RunningHub, message: str, payload: Any, reason: str, result: str
) -> None:
    seen, ended = drive(demo_hub, f"agui-client-{uuid.uuid4()}", message, [payload])

    assert ended["errors"] == [] and ended["warnings"] == []
    [[asked]] = [said["interrupts"] for said in seen]
    assert asked["reason"] == reason and asked["id"].startswith("eli_")
    assert ended["outcomes"] == ["interrupt", "success"] and ended["pending"] == []
    user, assistant, tool, answer = ended["messages"]
    assert user["role"] == "user" and assistant["role"] == "assistant"
    assert [c["id"] for c in assistant["toolCalls"]] == [asked["toolCallId"]]
    assert tool["role"] == "tool" and tool["toolCallId"] == asked["toolCallId"] and tool["content"].startswith(result)
    assert answer["role"] == "assistant" and answer["content"].startswith(result)
    assert ended["events"].count("TOOL_CALL_START") == 1  # the resumed run adds the result to the original call


def test_the_ag_ui_client_approves_the_demo_rollback_then_answers_its_form(demo_hub: RunningHub) -> None:
    rollback = '/call release.rollback {"service": "orders"}'
    seen, ended = drive(demo_hub, f"agui-client-{uuid.uuid4()}", rollback, [{"approved": True}, {"confirm": True}])

    assert ended["errors"] == [] and ended["warnings"] == []
    [[approval], [form]] = [said["interrupts"] for said in seen]
    assert approval["reason"] == "tool_call" and form["reason"] == "input_required"
    assert approval["toolCallId"] == form["toolCallId"]
    assert ended["outcomes"] == ["interrupt", "interrupt", "success"] and ended["pending"] == []
    assert ended["messages"][-1]["content"].startswith("Rolled orders back to the previous release.")
    assert ended["events"].count("TOOL_CALL_START") == 1


def test_the_ag_ui_client_reads_a_refused_resume_as_a_run_error_and_keeps_the_interrupt_open(hub: RunningHub) -> None:
    said, ended = drive(
        hub,
        "agui-client-refused",
        '/call mrtr.provision {"name": "twice"}',
        [{"region": "mars"}, {"region": "eu-west-1"}],
    )

    first, second = said
    assert first["errors"] == []
    [refused] = second["errors"]
    assert refused.startswith("invalid_payload: ") and "region" in refused
    assert second["interrupts"] == first["interrupts"]  # still open, as the client sees it
    assert ended["outcomes"] == ["interrupt", "success"] and ended["warnings"] == []
    assert ended["messages"][-1]["content"] == "Provisioned twice in eu-west-1."
