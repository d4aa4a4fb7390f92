"""The hub as an MCP gateway: `/mcp` offers the downstream tools beside the agents, called with the SDK Client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from typing import Any

import mcp_types as mt
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import HubFactory, McpProcess, RunningHub, free_port
from tests.servers.mrtr_server import INVENTORY
from tests.surfaces.mcp.test_server import connected
from tests.triggers.test_a2a_agents import AgentProcess, agent_entry

DECLARED = [{"name": f"lookup_{i:03}", "description": f"Look up record {i}."} for i in range(120)]
"""A user-scoped server's configured tools: shown until its user signs in, and more than one page."""


@pytest.fixture(scope="module")
def travel() -> Iterator[AgentProcess]:
    agent = AgentProcess()
    yield agent
    agent.kill()


@pytest.fixture
def gateway_hub(make_hub: HubFactory, legacy_server: McpProcess, mrtr_server: McpProcess) -> HubFactory:
    """Hubs with the test servers, and two user-scoped ones nobody has signed in to (nothing listens where they are)."""
    nowhere = f"http://127.0.0.1:{free_port()}/mcp"
    servers = [
        {"id": "legacy", "url": legacy_server.url, "protocol": "legacy"},
        {"id": "mrtr", "url": mrtr_server.url},
        {"id": "crm", "url": nowhere, "credential_scope": "user", "tools": DECLARED},
        {"id": "vault", "url": nowhere, "credential_scope": "user"},
    ]
    return partial(make_hub, mcp_servers=servers)


async def every_tool(client: Any) -> list[mt.Tool]:
    """Every page of the listing, following `nextCursor`; each page holds at most 100 tools."""
    tools: list[mt.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        assert len(page.tools) <= 100
        tools.extend(page.tools)
        if page.next_cursor is None:
            return tools
        cursor = page.next_cursor


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_the_listing_offers_each_downstream_tool_as_its_server_gives_it_in_pages(
    gateway_hub: HubFactory, travel: AgentProcess, mode: str
) -> None:
    gateway = gateway_hub(a2a_agents=[agent_entry(travel)])

    async def go() -> None:
        async with connected(gateway, mode) as (client, _):
            first = await client.list_tools()
            tools = await every_tool(client)
        assert first.next_cursor is not None and len(first.tools) == 100
        names = [t.name for t in tools]
        assert names[0] == "assistant"  # the agents first, as before
        assert {"legacy.provision", "mrtr.provision", "travel.send_message", "vault.connect"} <= set(names)
        assert [n for n in names if n.startswith("crm.")] == [f"crm.{t['name']}" for t in DECLARED]
        assert len(names) == len(set(names))
        [inventory] = [t for t in tools if t.name == "mrtr.inventory"]
        given = INVENTORY.model_dump(by_alias=True, exclude_none=True, mode="json")
        shown = inventory.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert shown == {**given, "name": "mrtr.inventory"}

    asyncio.run(go())


def test_a_cursor_that_no_page_gave_is_refused(gateway_hub: HubFactory) -> None:
    gateway = gateway_hub()

    async def go() -> None:
        async with connected(gateway, "2026-07-28") as (client, _):
            for cursor in ("not-a-cursor", "100000"):
                with pytest.raises(MCPError) as refused:
                    await client.list_tools(cursor=cursor)
                assert refused.value.error.code == mt.INVALID_PARAMS

    asyncio.run(go())


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_with_tools_false_the_listing_is_the_agents_alone(gateway_hub: HubFactory, mode: str) -> None:
    agents_only = gateway_hub(mcp_server={"tools": False})

    async def go() -> None:
        async with connected(agents_only, mode) as (client, _):
            listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["assistant"] and listed.next_cursor is None

    asyncio.run(go())


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_tool_the_caller_may_not_use_is_refused_as_one_no_server_has(gateway_hub: HubFactory, mode: str) -> None:
    # researcher is an agent the assistant delegates to: its tool is an agent's, never the caller's to call.
    agents = [{"id": "assistant", "tools": ["legacy", "mrtr", "researcher"]}, {"id": "researcher", "tools": ["mrtr"]}]
    gateway = gateway_hub(agents=agents)
    agents_only = gateway_hub(mcp_server={"tools": False})

    async def refusal(hub: RunningHub, name: str) -> tuple[int, str]:
        async with connected(hub, mode) as (client, _):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {"name": "orders"})
        return refused.value.error.code, refused.value.error.message.replace(name, "NAME")

    async def go() -> None:
        unknown = await refusal(gateway, "nosuch.tool")
        assert unknown == (mt.INVALID_PARAMS, "Unknown tool: NAME")
        for name in ("researcher.delegate", "mrtr.nothing", "assistant.ask", "crm"):
            assert await refusal(gateway, name) == unknown, name
        assert await refusal(agents_only, "mrtr.provision") == unknown  # only the agents are offered there

    asyncio.run(go())
