"""MCP tasks both ways through the gateway: a downstream server's task that pauses for input becomes this client's
question (in its era, or on its own task), and a task-capable client's direct call becomes a task of the hub's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import mcp_types as mt
import pytest
from mcp.client import ClientRequestContext

from elicithub.protocol.mcp_tasks import TaskHandle
from tests.conftest import HubFactory, RunningHub, served
from tests.servers.tasks_server import TaskBook, build
from tests.surfaces.mcp.test_server import connected, text
from tests.surfaces.mcp.test_tasks import ack, get, pending, tasks_client, until_ended, update

MIGRATED = "migrate orders done (confirm={'confirm': True})."


@pytest.fixture
def warehouse(make_hub: HubFactory) -> Iterator[tuple[RunningHub, TaskBook]]:
    """A hub whose `warehouse` server answers each call with a 2026-07-28 task that asks for input on the way."""
    server, book = build()
    with served(server.streamable_http_app()) as downstream:
        hub = make_hub(mcp_servers=[{"id": "warehouse", "url": f"{downstream.url}/mcp"}])
        yield hub, book
        hub.stop()


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_downstream_task_that_pauses_asks_this_client_and_its_result_comes_back(
    warehouse: tuple[RunningHub, TaskBook], mode: str
) -> None:
    hub, book = warehouse

    async def confirm(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        return mt.ElicitResult(action="accept", content={"confirm": True})

    async def go() -> None:
        async with connected(hub, mode, elicitation_callback=confirm) as (client, _):
            result = await client.call_tool("warehouse.migrate", {"name": "orders"})
        assert text(result) == MIGRATED and not result.is_error

    asyncio.run(go())
    assert book.calls["migrate"] == 1
    [task] = book.tasks.values()
    assert task.answers == {"confirm": {"action": "accept", "content": {"confirm": True}}}
    assert pending(hub) == 0


def test_a_task_capable_client_answers_the_downstream_tasks_question_on_a_task_of_its_own(
    warehouse: tuple[RunningHub, TaskBook],
) -> None:
    hub, book = warehouse

    async def go() -> dict[str, Any]:
        async with tasks_client(hub) as (client, asked):
            handle = await client.session.call_tool(
                "warehouse.migrate", {"name": "orders"}, allow_input_required=True, allow_claimed=True
            )
            assert isinstance(handle, TaskHandle), handle
            assert handle.status == "input_required"
            task = await get(client, handle.task_id)
            [(key, request)] = task["inputRequests"].items()
            assert request["params"]["message"] == "Migrate orders now?"
            assert ack(await update(client, handle.task_id, {key: {"action": "accept", "content": {"confirm": True}}}))
            done = await until_ended(client, handle.task_id)
            assert asked == []  # the task carried the question
            return done

    done = asyncio.run(go())
    assert done["status"] == "completed"
    # The downstream server's result as it gave it (in this era's shape): no conversation of the hub's is named.
    given = {"content": [{"type": "text", "text": MIGRATED}], "isError": False, "resultType": "complete"}
    assert done["result"] == given
    assert book.calls["migrate"] == 1


def test_a_task_capable_clients_call_that_asks_nothing_is_answered_at_once(
    make_hub: HubFactory,
) -> None:
    hub = make_hub()

    async def go() -> None:
        async with tasks_client(hub) as (client, _):
            result = await client.session.call_tool(
                "mrtr.inventory", {"name": "shelf"}, allow_input_required=True, allow_claimed=True
            )
        assert isinstance(result, mt.CallToolResult) and result.structured_content == {"count": 3}

    asyncio.run(go())
