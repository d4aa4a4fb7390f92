"""A 2025-11-25 era MCP server (official SDK MCPServer) that asks with elicitation/create mid-call."""

from __future__ import annotations

import sys
from collections import Counter

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

server = MCPServer("legacy-provisioner")
PROVISIONED: Counter[str] = Counter()
"""How many times each name was provisioned: a tool call that completes twice shows here."""


class Region(BaseModel):
    region: str = Field(description="Cloud region", json_schema_extra={"enum": ["us-east-1", "eu-west-1"]})


@server.tool()
async def provision(name: str, ctx: Context) -> str:
    """Provision a database; asks which region."""
    answer = await ctx.elicit(f"Which region should {name} live in?", Region)
    if answer.action == "accept":
        PROVISIONED[name] += 1
        return f"Provisioned {name} in {answer.data.region}."
    raise ToolError(f"Provisioning of {name} stopped: the user chose {answer.action}.")


@server.custom_route("/debug/provisioned", methods=["GET"])
async def provisioned(request: Request) -> Response:
    return JSONResponse(dict(PROVISIONED))


@server.tool()
async def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
