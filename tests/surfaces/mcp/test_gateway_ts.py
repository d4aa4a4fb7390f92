"""The hub as an MCP gateway, used by the TypeScript SDK's `Client` over `StreamableHTTPClientTransport` (pinned in
tests/conformance, driven by gateway_client.mjs there): what a team's own TypeScript agent sees on `/mcp`."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HubFactory, McpProcess, RunningHub, free_port
from tests.servers.mrtr_server import INVENTORY
from tests.surfaces.mcp.test_server import token
from tests.surfaces.pages.inboxes import InboxStream
from tests.triggers.approving import answer

PROJECT = Path(__file__).resolve().parents[2] / "conformance"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (PROJECT / "node_modules").exists(),
    reason="needs node and tests/conformance/node_modules (./scripts/test runs npm ci there when node is installed)",
)

DECLARED = [{"name": f"lookup_{i:03}", "description": f"Look up record {i}."} for i in range(120)]
"""A user-scoped server's configured tools, shown until its user signs in: with them the listing is two pages."""


@pytest.fixture
def gateway_hub(make_hub: HubFactory, legacy_server: McpProcess, mrtr_server: McpProcess) -> HubFactory:
    """Hubs with the test servers, and a user-scoped one nobody has signed in to (nothing listens where it is)."""
    servers = [
        {"id": "legacy", "url": legacy_server.url, "protocol": "legacy"},
        {"id": "mrtr", "url": mrtr_server.url},
        {"id": "crm", "url": f"http://127.0.0.1:{free_port()}/mcp", "credential_scope": "user", "tools": DECLARED},
    ]
    return partial(make_hub, mcp_servers=servers)


def command(hub: RunningHub, scenario: str, tool: str = "", arguments: dict[str, Any] | None = None) -> list[str]:
    return ["node", "gateway_client.mjs", hub.url, token("alice"), scenario, tool, json.dumps(arguments or {})]


def seen(done: subprocess.CompletedProcess[str] | tuple[int, str, str]) -> dict[str, Any]:
    """What the script printed; it ended well, and its Client reported no error of its own."""
    code, out, err = (done.returncode, done.stdout, done.stderr) if not isinstance(done, tuple) else done
    assert code == 0, err
    printed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    assert printed["errors"] == [] and printed["protocolVersion"] == "2025-11-25"
    return printed


def drive(hub: RunningHub, scenario: str, tool: str = "", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    run = subprocess.run(
        command(hub, scenario, tool, arguments), cwd=PROJECT, capture_output=True, text=True, timeout=60, check=False
    )
    return seen(run)


def test_the_listing_pages_through_every_downstream_tool_as_its_server_gives_it(gateway_hub: HubFactory) -> None:
    listed = drive(gateway_hub(), "list")
    assert listed["pages"][0] == 100 and sum(listed["pages"]) == len(listed["tools"])
    names = [t["name"] for t in listed["tools"]]
    assert names[0] == "assistant"
    assert {"legacy.provision", "mrtr.provision", "mrtr.inventory"} <= set(names)
    assert [n for n in names if n.startswith("crm.")] == [f"crm.{t['name']}" for t in DECLARED]
    [inventory] = [t for t in listed["tools"] if t["name"] == "mrtr.inventory"]
    given = INVENTORY.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert inventory == {**given, "name": "mrtr.inventory"}  # title, outputSchema, annotations: as the server gave


def test_a_plain_call_returns_the_servers_structured_content(gateway_hub: HubFactory) -> None:
    # The script lists first, so the SDK checks structuredContent against the outputSchema the listing gave.
    called = drive(gateway_hub(), "call", "mrtr.inventory", {"name": "shelf"})
    assert called["asked"] == []
    result = called["result"]
    assert result["content"] == [{"type": "text", "text": "3"}] and result["structuredContent"] == {"count": 3}
    assert not result["isError"]
    assert "_meta" not in result  # the downstream server's serverInfo stamp is not the hub's to pass on


@pytest.mark.parametrize("server", ["mrtr", "legacy"])
def test_the_servers_form_question_is_answered_by_the_clients_elicitation_handler(
    gateway_hub: HubFactory, server: str
) -> None:
    # Whichever era the downstream server asks in, this 2025-11-25 client is asked with elicitation/create.
    name = f"ts-{server}"
    called = drive(gateway_hub(), "ask", f"{server}.provision", {"name": name})
    [question] = called["asked"]
    assert question["message"] == f"Which region should {name} live in?"
    assert question.get("mode", "form") == "form" and "region" in question["requestedSchema"]["properties"]
    assert called["result"]["content"] == [{"type": "text", "text": f"Provisioned {name} in eu-west-1."}]
    assert not called["result"].get("isError")


def test_a_denial_by_an_approver_is_a_tool_error_with_the_reason(gateway_hub: HubFactory) -> None:
    gateway = gateway_hub(approvals=[{"tools": ["mrtr.inventory"], "approvers": {"users": ["bob"]}}])
    with InboxStream(gateway.url, token("bob")) as bob:
        assert bob.started() == []
        client = subprocess.Popen(
            command(gateway, "call", "mrtr.inventory", {"name": "shelf"}),
            cwd=PROJECT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            added = bob.until("inbox-added")  # the call waits for bob
            assert added["context"]["arguments"] == {"name": "shelf"}
            reason = {"approve": False, "reason": "not during the freeze"}
            reply = answer(gateway.url, "bob", added["elicitationId"], "accept", reason)
            assert reply.status_code == 200, reply.text
            out, err = client.communicate(timeout=60)
        finally:
            client.kill()
    called = seen((client.returncode, out, err))
    assert called["asked"] == []  # the approval was bob's to give, not a question to this client
    denial = "Call of mrtr.inventory was not approved: denied by bob: not during the freeze"
    assert called["result"]["content"] == [{"type": "text", "text": denial}] and called["result"]["isError"]
    assert "structuredContent" not in called["result"]


@pytest.mark.parametrize("tool", ["nosuch.tool", "mrtr.nothing"])
def test_an_unknown_tool_is_invalid_params(gateway_hub: HubFactory, tool: str) -> None:
    refused = drive(gateway_hub(), "refused", tool, {"name": "shelf"})
    assert refused["error"] == {"code": -32602, "message": f"MCP error -32602: Unknown tool: {tool}"}
    assert "result" not in refused
