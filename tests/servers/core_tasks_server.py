"""A 2025-11-25 MCP server (official SDK low-level Server, handshake era) with tools that must run as tasks: it
declares `capabilities.tasks`, answers a `tools/call` carrying `task` with `CreateTaskResult`, and asks its questions
as related-task `elicitation/create` on the `tasks/result` stream."""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
    ToolExecution,
)

from elicithub.demo.tasks import TaskParams, text
from tests.servers.tasks_server import CONFIRM, TaskBook

RELATED = "io.modelcontextprotocol/related-task"


def build() -> tuple[Server[Any], TaskBook]:
    book = TaskBook()
    tasks: dict[str, dict[str, Any]] = {}

    async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        required = ToolExecution(task_support="required")
        return ListToolsResult(
            tools=[Tool(name=n, description=n, input_schema=schema, execution=required) for n in ("migrate", "explode")]
        )

    async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> dict[str, Any]:
        raise MCPError(INVALID_PARAMS, f"{params.name} must be called as a task")

    async def tasks_and_calls(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params: Any = ctx.params or {}
        if ctx.method == "initialize":
            result: Any = await call_next(ctx)
            result["capabilities"]["tasks"] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
            return dict(result)
        if ctx.method == "tools/call" and params.get("task") is not None:
            book.calls[params["name"]] += 1
            task_id = f"task-{len(tasks) + 1}"
            name = str((params.get("arguments") or {}).get("name", "db"))
            tasks[task_id] = {"tool": params["name"], "name": name, "status": "working"}
            book.touch()
            return {"task": view(task_id)}
        return await call_next(ctx)

    def view(task_id: str) -> dict[str, Any]:
        task = tasks[task_id]
        return {
            "taskId": task_id,
            "status": task["status"],
            "createdAt": "2025-11-25T00:00:00Z",
            "lastUpdatedAt": "2025-11-25T00:00:00Z",
            "ttl": 3_600_000,
            "pollInterval": 20,
        }

    def find(task_id: str) -> dict[str, Any]:
        if task_id not in tasks:
            raise MCPError(INVALID_PARAMS, f"Unknown task {task_id}")
        return tasks[task_id]

    async def get(ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        find(params.task_id)
        return view(params.task_id)

    async def result(ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        task = find(params.task_id)
        related = {RELATED: {"taskId": params.task_id}}
        if task["tool"] == "explode":
            task["status"] = "failed"
            raise MCPError(-32603, "the disk is full")
        task["status"] = "input_required"
        ask = ElicitRequestFormParams(message=f"Migrate {task['name']} now?", requested_schema=CONFIRM, _meta=related)
        answer = await ctx.session.send_request(ElicitRequest(params=ask), ElicitResult)
        if task["status"] == "cancelled":
            raise MCPError(INVALID_PARAMS, "the task was cancelled")
        task["status"] = "completed"
        book.touch()
        if answer.action != "accept":
            return {**text(f"migrate {task['name']} stopped: the user chose {answer.action}.", True), "_meta": related}
        return {**text(f"migrate {task['name']} done ({answer.content})."), "_meta": related}

    async def cancel(ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        find(params.task_id)["status"] = "cancelled"
        book.cancelled.append(params.task_id)
        book.touch()
        return view(params.task_id)

    server: Server[Any] = Server("tasks-2025-11-25", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(tasks_and_calls)
    server.add_request_handler("tasks/get", TaskParams, get)
    server.add_request_handler("tasks/result", TaskParams, result)
    server.add_request_handler("tasks/cancel", TaskParams, cancel)
    return server, book


if __name__ == "__main__":
    uvicorn.run(build()[0].streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
