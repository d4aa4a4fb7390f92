"""On the hub's A2A and MCP surfaces, a requester's call waiting on other people's approval just waits, and says so
in its status message; the approver's answer makes it go on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
from a2a.helpers import get_message_text
from a2a.types import SendMessageRequest, TaskState

from elicithub.protocol.mcp_task_requests import Anything, TaskResult
from elicithub.protocol.mcp_tasks import TaskParams
from elicithub.triggers.mcp.tasks import start_core_task
from tests.conftest import HubFactory, RunningHub
from tests.surfaces.a2a.test_agent import a2a_client, label, message
from tests.surfaces.mcp.test_server import connected
from tests.surfaces.mcp.test_tasks import get
from tests.triggers.approving import GROUPS, PEOPLE, RESTART, USERS, OpsServer, policy

WAITING = "Waiting for approval by group ops."


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


@pytest.fixture
def hub(make_hub: HubFactory, ops: OpsServer) -> RunningHub:
    return make_hub(users=USERS, groups=GROUPS, mcp_servers=[{"id": "ops", "url": ops.url}], approvals=[policy()])


async def approve(hub: RunningHub, elicitation_id: str) -> None:
    headers = {"authorization": f"Bearer {PEOPLE['bob']}"}
    async with httpx.AsyncClient(base_url=hub.url, headers=headers, timeout=30) as bob:
        body = {"elicitationId": elicitation_id, "action": "accept", "content": {"approve": True}}
        assert (await bob.post("/run/api/elicitation-responses", json=body)).status_code == 200


async def open_approval(hub: RunningHub) -> str:
    """The id of the one open approval (as bob, an approver, would find it)."""
    approvals = await hub.hub.answerable.questions("bob")
    [approval] = approvals
    return approval.id


def test_an_a2a_task_waiting_for_approval_is_working_and_says_so(hub: RunningHub, ops: OpsServer) -> None:
    async def go() -> list[str]:
        seen: list[str] = []
        async with a2a_client(hub, streaming=True) as client:
            async for event in client.send_message(SendMessageRequest(message=message(RESTART))):
                kind = event.WhichOneof("payload")
                if kind == "status_update":
                    status = event.status_update.status
                    said = get_message_text(status.message) if status.HasField("message") else ""
                    seen.append(f"{TaskState.Name(status.state)}:{said}")
                    if said == WAITING:
                        assert ops.calls == []
                        await approve(hub, hub.on_loop(open_approval(hub)))
                elif kind != "message":
                    seen.append(label(event))
        return seen

    seen = asyncio.run(go())
    assert f"TASK_STATE_WORKING:{WAITING}" in seen
    assert seen[-2:] == ["artifact:Restarted orders with 2 replicas.", "TASK_STATE_COMPLETED:"]
    assert not any("INPUT_REQUIRED" in s for s in seen)  # nothing for the requester to answer
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def test_an_mcp_task_waiting_for_approval_is_working_with_a_status_message(hub: RunningHub, ops: OpsServer) -> None:
    async def go() -> None:
        async with connected(hub, "legacy") as (client, asked):
            handle = await start_core_task(client.session, "assistant", {"message": RESTART})
            deadline = time.monotonic() + 30
            while (task := await get(client, handle.task_id)).get("statusMessage") != WAITING:
                assert task["status"] == "working" and time.monotonic() < deadline, task
                await asyncio.sleep(0.05)
            assert ops.calls == []
            await approve(hub, hub.on_loop(open_approval(hub)))
            params = TaskParams(task_id=handle.task_id)
            result = (await client.session.send_request(TaskResult(params=params), Anything)).data()
            assert result["content"][0]["text"] == "Restarted orders with 2 replicas."
            assert asked == []  # never asked anything

    asyncio.run(go())
    assert ops.calls == [{"service": "orders", "replicas": 2}]
