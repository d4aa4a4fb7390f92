"""AI SDK native approvals (`ui_stream: {native_approvals: true}`) with the AI SDK's own client (pinned in
tests/aisdk): `ai` 6's `Chat` approves or denies with `addToolApprovalResponse`, and with the option off an `ai` 5
client sees the stream it always saw."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import HubFactory, RunningHub
from tests.surfaces.chat.test_aisdk_client import drive, pytestmark  # noqa: F401  (the same skip)
from tests.triggers.approving import OpsServer


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


def approving_hub(make_hub: HubFactory, ops: OpsServer, **changes: Any) -> RunningHub:
    servers = [{"id": "ops", "url": ops.url}]
    return make_hub(mcp_servers=servers, approvals=[{"tools": ["ops.*"], "approvers": "requester"}], **changes)


TODAY = [
    "start",
    "start-step",
    "tool-input-available",
    "data-elicitation-request",
    "data-elicitation-resolved",
    "tool-output-available",
    "finish-step",
    "start-step",
    "text-start",
    "text-delta",
    "text-end",
    "finish-step",
    "finish",
    "[DONE]",
]
"""The chunks of a requester-approved call answered at the answer endpoint, recorded before native approvals."""


@pytest.mark.parametrize("version", ["ai5", "ai6"])
def test_with_the_option_off_a_client_sees_the_stream_it_always_saw(
    make_hub: HubFactory, ops: OpsServer, version: str
) -> None:
    hub = approving_hub(make_hub, ops)
    result = drive(hub, version, "approval", f"aisdk-approval-off-{version}")
    assert result["errors"] == [] and result["valid"] and result["status"] == "ready"
    assert result["chunks"] == [TODAY]
    assert result["messages"][-1]["text"] == "Restarted orders with 2 replicas."
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def native_hub(make_hub: HubFactory, ops: OpsServer) -> RunningHub:
    return approving_hub(make_hub, ops, ui_stream={"native_approvals": True})


def test_approving_with_add_tool_approval_response_calls_the_tool_once(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = native_hub(make_hub, ops)
    result = drive(hub, "ai6", "native-approve", "aisdk-native-approve")
    assert result["errors"] == [] and result["valid"] and result["status"] == "ready"
    asked, answered = result["chunks"]
    assert asked == [
        "start",
        "start-step",
        "tool-input-available",
        "tool-approval-request",
        "finish-step",
        "finish",
        "[DONE]",
    ]
    [approval] = result["approvals"]
    assert approval["status"] == "ready" and approval["id"].startswith("eli_")
    assert result["requests"] == ["POST /run/api/chat", "POST /run/api/chat"]
    assert result["resends"] is False  # the message is complete: nothing is sent again
    user, assistant = result["messages"]  # the answer's stream went on with the same assistant message
    assert user["role"] == "user" and assistant["role"] == "assistant"
    [tool] = assistant["tools"]
    assert tool["toolCallId"] == approval["toolCallId"] and tool["state"] == "output-available"
    assert tool["output"] == "Restarted orders with 2 replicas."
    assert tool["approval"] == {"id": approval["id"], "approved": True}
    assert assistant["text"] == "Restarted orders with 2 replicas."
    assert answered[:2] == ["start", "data-elicitation-resolved"]  # the call's part is in the message sent back
    assert "tool-output-available" in answered and answered[-2:] == ["finish", "[DONE]"]
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def test_denying_with_a_reason_refuses_the_call_with_that_reason(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = native_hub(make_hub, ops)
    result = drive(hub, "ai6", "native-deny", "aisdk-native-deny")
    assert result["errors"] == [] and result["valid"] and result["status"] == "ready"
    [approval] = result["approvals"]
    [_, assistant] = result["messages"]
    [tool] = assistant["tools"]
    assert tool["toolCallId"] == approval["toolCallId"] and tool["state"] == "output-denied"
    assert result["resends"] is False
    assert tool["approval"] == {"id": approval["id"], "approved": False, "reason": "not during the freeze"}
    # The model is told the refusal (the scripted model says what its tool returned).
    refusal = "Call of ops.restart was not approved: declined by alice: not during the freeze"
    assert assistant["text"] == f"Tool error: {refusal}"
    assert "tool-output-denied" in result["chunks"][1]
    assert ops.calls == []


def test_a_reloaded_page_resumes_the_waiting_approval_and_approves_it(make_hub: HubFactory, ops: OpsServer) -> None:
    hub = native_hub(make_hub, ops)
    result = drive(hub, "ai6", "native-reload", "aisdk-native-reload")
    assert result["errors"] == [] and result["valid"] and result["status"] == "ready"
    assert result["requests"] == [
        "POST /run/api/chat",
        "GET /run/api/chat/aisdk-native-reload/stream",
        "POST /run/api/chat",
    ]
    asked, resumed, _ = result["chunks"]
    assert resumed == asked  # the run read again up to the approval it waits on
    [assistant] = result["messages"]  # the new page had no history: the assistant message, continued
    assert result["resends"] is False
    assert assistant["tools"][0]["state"] == "output-available"
    assert assistant["text"] == "Restarted orders with 2 replicas."
    assert ops.calls == [{"service": "orders", "replicas": 2}]
