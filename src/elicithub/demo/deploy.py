"""Two demo MCP servers, one per protocol era: `deploy` returns InputRequiredResult (and runs `migrate` as a task),
`release` elicits mid-call."""

from __future__ import annotations

import argparse

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)
from pydantic import BaseModel, Field

from elicithub.core.jsoncodec import JsonObject
from elicithub.demo.migrate import migrations

REGIONS = {
    "eu-west-1": "Europe (Ireland)",
    "us-east-1": "US East (Virginia)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
}
FEATURES = ["canary", "autoscaling", "tracing"]
DEPLOY_FORM: JsonObject = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "title": "Region",
            "oneOf": [{"const": code, "title": title} for code, title in REGIONS.items()],
        },
        "features": {
            "type": "array",
            "title": "Features",
            "description": "Optional rollout features.",
            "items": {"type": "string", "enum": FEATURES},
        },
        "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10, "default": 2},
        "confirm": {"type": "boolean", "title": "I understand this deploys to production"},
    },
    "required": ["region", "confirm"],
}
_ANSWER = "deploy"


def _text(value: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=value)], is_error=error)


def deploy_server() -> MCPServer:
    """The `deploy` server (MCP 2026-07-28): one form per deploy, returned as an InputRequiredResult; `migrate` runs
    as a task (io.modelcontextprotocol/tasks) that asks for confirmation while it waits."""
    server: MCPServer = MCPServer(
        "deploy", instructions="Deploys demo services to production.", log_level="WARNING", extensions=[migrations()]
    )

    @server.tool()
    async def deploy_service(service: str, ctx: Context) -> CallToolResult | InputRequiredResult:
        """Deploy a service to production; asks where and how first."""
        answer = (ctx.input_responses or {}).get(_ANSWER)
        # The SDK seals request_state and binds it to these arguments; requiring ours means only a reply to this
        # question counts, never input_responses sent on a first call.
        if not isinstance(answer, ElicitResult) or ctx.request_state != _ANSWER:
            question = ElicitRequestFormParams(
                message=f"How should {service} be deployed?", requested_schema=DEPLOY_FORM
            )
            return InputRequiredResult(input_requests={_ANSWER: ElicitRequest(params=question)}, request_state=_ANSWER)
        if answer.action != "accept" or answer.content is None:
            return _text(f"The deploy of {service} was cancelled; nothing was deployed.")
        return _deploy(service, dict(answer.content))

    return server


def _deploy(service: str, content: JsonObject) -> CallToolResult:
    region, replicas = content.get("region"), content.get("replicas", 2)
    features = content.get("features") or []
    if isinstance(replicas, float) and replicas.is_integer():
        replicas = int(replicas)  # JSON does not tell 3 from 3.0
    if region not in REGIONS:
        return _text(f"Unknown region {region!r}; nothing was deployed.", error=True)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= 10:
        return _text("replicas must be a whole number from 1 to 10; nothing was deployed.", error=True)
    if not isinstance(features, list) or any(f not in FEATURES for f in features):
        return _text(f"features must be chosen from {', '.join(FEATURES)}; nothing was deployed.", error=True)
    if content.get("confirm") is not True:
        return _text(f"Production deploy of {service} was not confirmed; nothing was deployed.")
    chosen = f" ({', '.join(features)})" if features else ""
    return _text(f"Deployed {service} to {region} with {replicas} replica{'s' if replicas != 1 else ''}{chosen}.")


class Rollback(BaseModel):
    confirm: bool = Field(title="Roll back to the previous release")
    reason: str | None = Field(default=None, title="Reason", description="Optional; kept in the release log.")


def release_server() -> MCPServer:
    """The `release` server (MCP 2025-11-25): asks for confirmation mid-call with elicitation/create."""
    server: MCPServer = MCPServer("release", instructions="Rolls demo services back.", log_level="WARNING")

    @server.tool(structured_output=False)
    async def rollback(service: str, ctx: Context) -> str:
        """Roll a service back to its previous release; asks for confirmation first."""
        answer = await ctx.elicit(f"Roll {service} back to the previous release?", Rollback)
        if answer.action != "accept":
            return f"The rollback of {service} was cancelled; nothing changed."
        if not answer.data.confirm:
            return f"The rollback of {service} was not confirmed; nothing changed."
        reason = f" Reason: {answer.data.reason}" if answer.data.reason else ""
        return f"Rolled {service} back to the previous release.{reason}"

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m elicithub.demo.deploy", description=__doc__)
    parser.add_argument("port", type=int, help="port to listen on")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--server", choices=["deploy", "release"], default="deploy", help="which server to run")
    args = parser.parse_args(argv)
    server = deploy_server() if args.server == "deploy" else release_server()
    uvicorn.run(server.streamable_http_app(host=args.host), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
