"""A 2026-07-28 MCP server (official SDK low-level Server) whose tools answer `tools/call` with a task
(`io.modelcontextprotocol/tasks`), asking for input while the task waits. `shape="draft"` speaks the earlier draft
instead: `tasks/get` says input_required without the requests, `tasks/result` returns them with a requestState, and
answers come by `tasks/input_response` (it does not know `tasks/update`).

Its tasks are the demo's scripted tasks (elicithub.demo.tasks), advanced one step per `tasks/get`; every test waits
on the state here (`TaskBook.wait_for`), never on time."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, ListToolsResult, PaginatedRequestParams, Tool

from elicithub.demo.tasks import (
    AnswerParams,
    Step,
    Task,
    TaskParams,
    form,
    text,
)
from elicithub.protocol.mcp_tasks import TASKS_EXTENSION

CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Go ahead?"}},
    "required": ["confirm"],
}
REGION = {
    "type": "object",
    "properties": {"region": {"type": "string", "enum": ["us-east-1", "eu-west-1"]}},
    "required": ["region"],
}


def link(message: str, url: str) -> dict[str, Any]:
    params = {"mode": "url", "message": message, "url": url, "elicitationId": "sign-in-1"}
    return {"method": "elicitation/create", "params": params}


SCRIPTS: dict[str, Callable[[str], list[Step]]] = {
    "migrate": lambda name: [("work", None), ("ask", {"confirm": form(f"Migrate {name} now?", CONFIRM)})],
    "deploy": lambda name: [
        ("ask", {"region": form("Which region?", REGION)}),
        ("work", None),
        ("ask", {"confirm": form(f"Deploy {name}?", CONFIRM)}),
    ],
    "connect": lambda name: [("ask", {"sign-in": link("Sign in to Warehouse.", "https://warehouse.example/login")})],
    "copy": lambda name: [("work", f"Copying {name}"), ("work", f"Copying {name}"), ("work", f"Indexing {name}")],
    "explode": lambda name: [("work", None), ("fail", "the disk is full")],
    "abandon": lambda name: [("work", None), ("cancel", "the operator stopped it")],
    "forget": lambda name: [("forget", None)],
}


def scripted(task_id: str, tool: str, name: str) -> Task:
    """A task of `tool` whose result names what it was told, and which any answer but accept stops."""

    def finish(task: Task) -> dict[str, Any]:
        said = ", ".join(f"{k}={v.get('content')}" for k, v in sorted(task.answers.items()))
        return text(f"{tool} {name} done ({said}).")

    def judge(task: Task, response: dict[str, Any]) -> dict[str, Any] | None:
        if response.get("action") == "accept":
            return None
        return text(f"{tool} {name} stopped: the user chose {response.get('action')}.", True)

    return Task(task_id, SCRIPTS[tool](name), finish, judge)


class TaskBook:
    """Every task of the server, what it was told, and how often each tool was called."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.calls: Counter[str] = Counter()
        self.cancelled: list[str] = []
        self.changed = threading.Condition()

    def wait_for(self, check: Callable[[], bool], timeout: float = 20) -> None:
        with self.changed:
            if not self.changed.wait_for(check, timeout):
                raise TimeoutError("the task server never reached the state the test waits for")

    def touch(self) -> None:
        with self.changed:
            self.changed.notify_all()


def build(shape: str = "2026-07-28") -> tuple[Server[Any], TaskBook]:
    book = TaskBook()

    async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        return ListToolsResult(tools=[Tool(name=n, description=f"{n} (a task)", input_schema=schema) for n in SCRIPTS])

    async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> dict[str, Any]:
        book.calls[params.name] += 1
        declared = ((params.meta or {}).get(CAPABILITIES) or {}).get("extensions") or {}
        if TASKS_EXTENSION not in declared:
            raise MCPError(
                -32021,
                "Missing required client capability",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        name = str((params.arguments or {}).get("name", "db"))
        task = scripted(f"task-{len(book.tasks) + 1}", params.name, name)
        book.tasks[task.task_id] = task
        book.touch()
        return {"resultType": "task", **task.view(False)}

    def find(task_id: str) -> Task:
        task = book.tasks.get(task_id)
        if task is None or task.steps[:1] == [("forget", None)]:
            raise MCPError(INVALID_PARAMS, f"Unknown task {task_id}")
        return task

    async def get(ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        task = find(params.task_id)
        task.advance()
        book.touch()
        return task.view(shape != "draft")

    async def update(ctx: ServerRequestContext, params: AnswerParams) -> dict[str, Any]:
        find(params.task_id).told(params.input_responses)
        book.touch()
        return {}

    async def result(ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        task = find(params.task_id)
        if task.status == "input_required":
            return {"resultType": "input_required", "inputRequests": task.asking, "requestState": f"r:{task.task_id}"}
        return task.result or {}

    async def input_response(ctx: ServerRequestContext, params: AnswerParams) -> dict[str, Any]:
        task = find(params.task_id)
        if params.request_state != f"r:{task.task_id}":
            raise MCPError(INVALID_PARAMS, "requestState was altered")
        task.told(params.input_responses)
        book.touch()
        return {}

    async def cancel(ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        task = find(params.task_id)
        task.cancel()
        book.cancelled.append(task.task_id)
        book.touch()
        return {}

    server: Server[Any] = Server(f"tasks-{shape}", on_list_tools=list_tools, on_call_tool=call_tool)
    server.extensions[TASKS_EXTENSION] = {}
    server.add_request_handler("tasks/get", TaskParams, get)
    server.add_request_handler("tasks/cancel", TaskParams, cancel)
    if shape == "draft":
        server.add_request_handler("tasks/result", TaskParams, result)
        server.add_request_handler("tasks/input_response", AnswerParams, input_response)
    else:
        server.add_request_handler("tasks/update", AnswerParams, update)
    return server, book


if __name__ == "__main__":
    app = build(sys.argv[2] if len(sys.argv) > 2 else "2026-07-28")[0].streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
