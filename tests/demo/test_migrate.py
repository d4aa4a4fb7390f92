"""The deploy server's `migrate` tool as an MCP task (io.modelcontextprotocol/tasks), driven on the wire."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from elicithub.demo.launcher import Demo
from elicithub.protocol.mcp_task_requests import Anything, CancelTask, GetTask, TasksClientExtension, UpdateTask
from elicithub.protocol.mcp_tasks import TaskHandle, TaskParams, UpdateParams

pytestmark = pytest.mark.anyio

DATABASE = {"database": "orders-db"}


@pytest.fixture
async def deploy(demo: Demo) -> AsyncIterator[Client]:
    async with Client(
        streamable_http_client(demo.deploy_url), mode="2026-07-28", extensions=[TasksClientExtension()]
    ) as c:
        yield c


async def start(client: Client) -> TaskHandle:
    handle = await client.session.call_tool("migrate", DATABASE, allow_claimed=True)
    assert isinstance(handle, TaskHandle)
    return handle


async def get(client: Client, task_id: str) -> dict[str, Any]:
    return (await client.session.send_request(GetTask(params=TaskParams(task_id=task_id)), Anything)).data()


async def until(client: Client, task_id: str, status: str) -> tuple[dict[str, Any], list[str]]:
    """Polls the task until it is `status`; also the status messages it showed on the way."""
    said: list[str] = []
    for _ in range(20):
        task = await get(client, task_id)
        if task.get("statusMessage"):
            said.append(task["statusMessage"])
        if task["status"] == status:
            return task, said
    raise AssertionError(f"task {task_id} never became {status}; it is {task}")


async def update(client: Client, task_id: str, action: str, content: dict[str, Any] | None = None) -> None:
    reply = mt.ElicitResult(action=action, content=content)  # type: ignore[arg-type]
    await client.session.send_request(
        UpdateTask(params=UpdateParams(task_id=task_id, input_responses={"confirm": reply})), Anything
    )


async def test_migrate_works_asks_for_confirmation_half_way_and_finishes(deploy: Client) -> None:
    handle = await start(deploy)
    assert handle.status == "working"
    assert handle.poll_interval_ms == 250

    asking, worked = await until(deploy, handle.task_id, "input_required")
    assert worked == ["Connecting to orders-db", "Checking the schema of orders-db: 3 migrations pending"]
    [(key, request)] = asking["inputRequests"].items()
    assert key == "confirm"
    assert request["params"]["message"] == "Apply 3 pending migrations to orders-db?"
    assert request["params"]["requestedSchema"]["properties"]["apply"]["type"] == "boolean"

    await update(deploy, handle.task_id, "accept", {"apply": True})
    done, applied = await until(deploy, handle.task_id, "completed")
    assert applied == [
        "Applying 0042_add_order_status",
        "Applying 0043_index_orders_by_customer",
        "Applying 0044_drop_legacy_totals",
    ]
    assert done["result"]["content"][0]["text"] == "Migrated orders-db: 3 migrations applied."
    assert done["result"]["isError"] is False


@pytest.mark.parametrize(("action", "content"), [("decline", None), ("accept", {"apply": False})])
async def test_a_declined_or_unconfirmed_migration_applies_nothing(
    deploy: Client, action: str, content: dict[str, Any] | None
) -> None:
    handle = await start(deploy)
    await until(deploy, handle.task_id, "input_required")

    await update(deploy, handle.task_id, action, content)

    done = await get(deploy, handle.task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Migration of orders-db stopped: not confirmed, nothing was applied."


async def test_a_cancelled_migration_stays_cancelled(deploy: Client) -> None:
    handle = await start(deploy)
    await until(deploy, handle.task_id, "input_required")

    await deploy.session.send_request(CancelTask(params=TaskParams(task_id=handle.task_id)), Anything)
    await update(deploy, handle.task_id, "accept", {"apply": True})  # too late: no longer outstanding

    cancelled = await get(deploy, handle.task_id)
    assert cancelled["status"] == "cancelled"
    assert "inputRequests" not in cancelled and "result" not in cancelled


async def test_an_unknown_task_is_invalid_params(deploy: Client) -> None:
    with pytest.raises(MCPError) as raised:
        await get(deploy, "no-such-task")
    assert raised.value.code == mt.INVALID_PARAMS


async def test_migrate_without_the_tasks_extension_is_missing_capability(demo: Demo) -> None:
    async with Client(streamable_http_client(demo.deploy_url), mode="2026-07-28") as plain:
        with pytest.raises(MCPError) as raised:
            await plain.session.call_tool("migrate", DATABASE)
    assert raised.value.code == mt.MISSING_REQUIRED_CLIENT_CAPABILITY
