"""A 2025-11-25 MCP server (official SDK MCPServer) whose tools ask on the session's standalone GET stream.

That is what a TypeScript SDK server does when its tool calls `server.elicitInput()` without a related request:
the `elicitation/create` is related to no `tools/call`. The SDK's helpers send it that way when they are given no
`related_request_id`.
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from mcp.server.elicitation import elicit_url, elicit_with_validation
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field
from starlette.types import ASGIApp


class Region(BaseModel):
    region: str = Field(description="Cloud region", json_schema_extra={"enum": ["us-east-1", "eu-west-1"]})


def mcp_app(together: int = 2) -> ASGIApp:
    """The server; `provision_together` calls ask only once `together` of them are in progress, and return only
    once all of them have their answers, so every question is asked while they all are in flight."""
    server = MCPServer("standalone-asker")
    arrived: list[str] = []
    answered: list[str] = []
    all_arrived, all_answered = asyncio.Event(), asyncio.Event()

    async def ask_region(name: str, ctx: Context) -> str:
        answer = await elicit_with_validation(ctx.session, f"Which region should {name} live in?", Region)
        if answer.action == "accept":
            return f"Provisioned {name} in {answer.data.region}."
        raise ToolError(f"Provisioning of {name} stopped: the user chose {answer.action}.")

    @server.tool()
    async def provision(name: str, ctx: Context) -> str:
        """Provision a database; asks which region, on the standalone stream."""
        return await ask_region(name, ctx)

    @server.tool()
    async def provision_together(name: str, ctx: Context) -> str:
        """Like provision, but asks only while `together` such calls are in progress."""
        arrived.append(name)
        if len(arrived) == together:
            all_arrived.set()
        await all_arrived.wait()
        try:
            return await ask_region(name, ctx)
        except Exception as exc:
            raise ToolError(f"{name}: {exc}") from exc
        finally:
            answered.append(name)
            if len(answered) == together:
                all_answered.set()
            await all_answered.wait()

    @server.tool()
    async def connect(ctx: Context) -> str:
        """Asks the person to open a sign-in link (url mode), on the standalone stream."""
        result = await elicit_url(ctx.session, "Sign in to continue.", "https://example.com/sign-in", "sign-in-1")
        return f"sign-in: {result.action}"

    return server.streamable_http_app()


if __name__ == "__main__":
    uvicorn.run(mcp_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
