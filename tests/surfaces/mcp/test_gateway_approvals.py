"""Approvals of direct calls through the gateway: the approver answers in their inbox on another hub sharing the
store (Redis); a task-capable 2026-07-28 client gets a task that says whom it waits for; a 2025-11-25 client's call
waits and gets the decision, a denial as the tool's error; and a desktop client that shows no questions and speaks no
tasks still gets its approved calls made."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import mcp_types as mt
import pytest

from elicithub.protocol.mcp_tasks import TaskHandle
from tests.conftest import HubFactory, McpProcess, RunningHub
from tests.surfaces.mcp.test_gateway import provisioned
from tests.surfaces.mcp.test_server import connected, text
from tests.surfaces.mcp.test_tasks import get, pending, tasks_client, until_ended
from tests.surfaces.pages.inboxes import InboxStream
from tests.triggers.approving import GROUPS, PEOPLE, USERS, OpsServer, answer, policy

WAITING = "Waiting for approval by group ops."
RESTART = {"service": "orders", "replicas": 2}
RESTARTED = "Restarted orders with 2 replicas."
APPROVE = {"approve": True}


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


def approving_hub(make_hub: HubFactory, ops: OpsServer, **overrides: Any) -> RunningHub:
    """A hub where every `ops.*` call needs the approval of the group ops (bob, carol); alice asks."""
    return make_hub(
        users=USERS,
        groups=GROUPS,
        mcp_servers=[{"id": "ops", "url": ops.url}, *overrides.pop("mcp_servers", [])],
        approvals=[policy()],
        **overrides,
    )


@pytest.fixture
def two_hubs(make_hub: HubFactory, ops: OpsServer, redis_url: str) -> tuple[RunningHub, RunningHub]:
    store = {"url": redis_url}
    return approving_hub(make_hub, ops, store=store), approving_hub(make_hub, ops, store=store)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("ops.restart", RESTART), ("assistant", {"message": f"/call ops.restart {json.dumps(RESTART)}"})],
    ids=["direct", "agent"],
)
def test_a_task_capable_clients_call_waits_for_the_approval_on_another_hub_as_a_task_that_says_whom(
    two_hubs: tuple[RunningHub, RunningHub], ops: OpsServer, tool: str, arguments: dict[str, Any]
) -> None:
    a, b = two_hubs

    async def go() -> dict[str, Any]:
        with InboxStream(b.url, PEOPLE["bob"]) as bob:
            assert bob.started() == []
            async with tasks_client(a) as (client, asked):
                handle = await client.session.call_tool(tool, arguments, allow_input_required=True, allow_claimed=True)
                # Nothing for alice to answer: a task, working, that says whom it waits for.
                assert isinstance(handle, TaskHandle), handle
                assert (handle.status, handle.status_message) == ("working", WAITING)
                task = await get(client, handle.task_id)
                assert (task["status"], task["statusMessage"]) == ("working", WAITING)
                added = await asyncio.to_thread(bob.until, "inbox-added")  # on the other hub
                assert added["context"]["requester"] == "alice" and added["context"]["arguments"] == RESTART
                assert ops.calls == []
                approved = await asyncio.to_thread(answer, b.url, "bob", added["elicitationId"], "accept", APPROVE)
                assert approved.status_code == 200, approved.text
                done = await until_ended(client, handle.task_id)
                assert asked == []
                return done

    done = asyncio.run(go())
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": RESTARTED}] and not done["result"]["isError"]
    assert ops.calls == [RESTART]


def test_a_2025_clients_call_denied_on_another_hub_is_the_tools_error_with_the_reason(
    two_hubs: tuple[RunningHub, RunningHub], ops: OpsServer
) -> None:
    a, b = two_hubs

    async def go() -> mt.CallToolResult:
        with InboxStream(b.url, PEOPLE["carol"]) as carol:
            assert carol.started() == []
            async with connected(a, "legacy") as (client, asked):
                call = asyncio.ensure_future(client.call_tool("ops.restart", RESTART))
                added = await asyncio.to_thread(carol.until, "inbox-added")
                assert not call.done()  # the call waits for the approvers
                denial = {"approve": False, "reason": "not during the freeze"}
                denied = await asyncio.to_thread(answer, b.url, "carol", added["elicitationId"], "accept", denial)
                assert denied.status_code == 200, denied.text
                result = await call
                assert asked == []
                return result

    result = asyncio.run(go())
    assert result.is_error
    assert text(result) == "Call of ops.restart was not approved: denied by carol: not during the freeze"
    assert ops.calls == []


def test_a_desktop_client_without_questions_or_tasks_gets_approved_calls_and_is_told_what_it_cannot_answer(
    make_hub: HubFactory, ops: OpsServer, mrtr_server: McpProcess
) -> None:
    # Like a desktop assistant: 2025-11-25, no elicitation capability, no tasks.
    hub = approving_hub(make_hub, ops, mcp_servers=[{"id": "mrtr", "url": mrtr_server.url}])
    desktop = mt.Implementation(name="claude-ai", version="0.1.0")

    async def go() -> None:
        with InboxStream(hub.url, PEOPLE["bob"]) as bob:
            assert bob.started() == []
            async with connected(hub, "legacy", elicitation_callback=None, client_info=desktop) as (client, _):
                listed = {t.name: t for t in (await client.list_tools()).tools}
                assert {"ops.restart", "mrtr.provision"} <= set(listed)
                assert listed["ops.restart"].execution is None  # a downstream tool is no 2025-11-25 task
                call = asyncio.ensure_future(client.call_tool("ops.restart", RESTART))
                added = await asyncio.to_thread(bob.until, "inbox-added")
                approved = await asyncio.to_thread(answer, hub.url, "bob", added["elicitationId"], "accept", APPROVE)
                assert approved.status_code == 200, approved.text
                restarted = await call
                asked = await client.call_tool("mrtr.provision", {"name": "desktop"})
        assert text(restarted) == RESTARTED and not restarted.is_error
        # The server's own question cannot reach this client: the call says so, in MCP's words, and makes nothing.
        assert asked.is_error
        assert "this MCP client did not declare the elicitation capability (form mode)" in text(asked)

    asyncio.run(go())
    assert ops.calls == [RESTART]
    assert provisioned(mrtr_server).get("desktop", 0) == 0
    assert pending(hub) == 0
