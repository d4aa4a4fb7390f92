"""The least a Python MCP gateway can be, for gateway.py to measure the hub against: the official SDK's server whose
one tool, `mrtr.inventory`, forwards each call on one kept SDK Client to the downstream server and returns its
result as given. No users, no runs, no log, no approvals: what the extra hop costs with the SDK on both sides.

Run:  python bench/sdk_proxy.py PORT DOWNSTREAM_URL  (gateway.py starts it)
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as mt
import uvicorn
from mcp import Client
from mcp.server import Server, ServerRequestContext

DOWNSTREAM = sys.argv[2] if len(sys.argv) > 2 else ""
kept: dict[str, Client] = {}
"""The downstream Client, connected for the app's lifetime (in its lifespan's task: an SDK Client's task group may
not be entered in one request's task and outlive it)."""
listed: list[mt.Tool] = []
"""The downstream tools, listed once at the start (as a gateway caches them)."""


async def list_tools(ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
    return mt.ListToolsResult(tools=listed)


async def call_tool(ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
    server, _, tool = params.name.partition(".")
    if server != "mrtr":
        raise ValueError(f"Unknown tool: {params.name}")
    result = await kept["mrtr"].call_tool(tool, params.arguments or {})
    assert isinstance(result, mt.CallToolResult)
    return result


server = Server("sdk-proxy", on_list_tools=list_tools, on_call_tool=call_tool)
app = server.streamable_http_app()
sessions = app.router.lifespan_context


@asynccontextmanager
async def lifespan(started: Any) -> AsyncIterator[None]:
    async with Client(DOWNSTREAM, mode="2026-07-28") as client, sessions(started):
        kept["mrtr"] = client
        tools = (await client.list_tools()).tools
        listed.extend(t.model_copy(update={"name": f"mrtr.{t.name}"}) for t in tools)
        yield


app.router.lifespan_context = lifespan


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
