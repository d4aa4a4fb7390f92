"""Where a `tools/call` becomes one of the hub's MCP tasks (surfaces/mcp/tasks.py), in the shape its client speaks:
2025-11-25 core tasks as a middleware (the SDK reads that era's `tools/call` results as `CallToolResult` only), and
2026-07-28 as the extension the hub declares, which also serves the tasks/* methods."""

from __future__ import annotations

from typing import Any

import mcp_types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from elicithub.protocol.mcp_tasks import TASKS_EXTENSION
from elicithub.surfaces.mcp.tasks import CORE_TASKS, McpTasks


class CoreTasks:
    """2025-11-25: declares the tasks, marks each agent's tool as callable as one, and answers a call of one with
    `task` by `CreateTaskResult`. (The downstream tools a gateway lists are never tasks in this era.)"""

    def __init__(self, tasks: McpTasks) -> None:
        self.tasks = tasks

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params: Any = ctx.params or {}
        if ctx.method == "tools/call" and ctx.protocol_version == CORE_TASKS and params.get("task") is not None:
            if params.get("name") in self.tasks.agents:
                start = self.tasks.agent_call(params["name"], params.get("arguments") or {})
                return await self.tasks.start(ctx, start, CORE_TASKS, True)
        result: Any = await call_next(ctx)
        if ctx.method == "initialize" and result.get("protocolVersion") == CORE_TASKS:
            result["capabilities"]["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        elif ctx.method == "tools/list" and ctx.protocol_version == CORE_TASKS:
            for tool in result.get("tools", []):
                tool["execution"] = {"taskSupport": "optional"}
        return result  # type: ignore[no-any-return]


class TasksServerExtension(Extension):
    """2026-07-28: the extension the hub declares, its methods, and its agents' calls (a direct call of a downstream
    tool is the gateway's, which asks `may_be_task` the same)."""

    identifier = TASKS_EXTENSION

    def __init__(self, tasks: McpTasks) -> None:
        self.tasks = tasks

    def methods(self) -> list[MethodBinding]:
        return self.tasks.methods()

    async def intercept_tool_call(
        self, params: mt.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if not (params.name in self.tasks.agents and may_be_task(ctx, params)):
            return await call_next(ctx)
        start = self.tasks.agent_call(params.name, params.arguments or {})
        return await self.tasks.start(ctx, start, "2026-07-28", params.task is not None)


def may_be_task(ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams) -> bool:
    """Whether a 2026-07-28 call may become a task: its request declares the extension (the client follows tasks),
    and it is no round's retry (which goes on as a round)."""
    capabilities = ctx.session.client_capabilities
    declared = TASKS_EXTENSION in ((capabilities.extensions if capabilities else None) or {})
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and declared and params.request_state is None
