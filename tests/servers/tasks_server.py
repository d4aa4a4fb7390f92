"""A 2026-07-28 MCP server (official SDK low-level Server) whose tools answer `tools/call` with a task
(`io.modelcontextprotocol/tasks`), asking for input while the task waits. `shape="draft"` speaks the earlier draft
instead: `tasks/get` says input_required without the requests, `tasks/result` returns them with a requestState, and
answers come by `tasks/input_response` (it does not know `tasks/update`).

The SDK has no tasks runtime: each task is a script of steps advanced one per `tasks/get`, so a client always sees
it working at least once, and every test waits on the state here (`TaskBook.wait_for`), never on time."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    ListToolsResult,
    PaginatedRequestParams,
    RequestParams,
    Tool,
)
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"
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


def form(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def link(message: str, url: str) -> dict[str, Any]:
    params = {"mode": "url", "message": message, "url": url, "elicitationId": "sign-in-1"}
    return {"method": "elicitation/create", "params": params}


def text(value: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": error}


Step = tuple[str, Any]
"""("work", None) | ("ask", {key: request}) | ("fail", message) | ("cancel", message) | ("done", text)."""

SCRIPTS: dict[str, Callable[[str], list[Step]]] = {
    "migrate": lambda name: [("work", None), ("ask", {"confirm": form(f"Migrate {name} now?", CONFIRM)})],
    "deploy": lambda name: [
        ("ask", {"region": form("Which region?", REGION)}),
        ("work", None),
        ("ask", {"confirm": form(f"Deploy {name}?", CONFIRM)}),
    ],
    "connect": lambda name: [("ask", {"sign-in": link("Sign in to Warehouse.", "https://warehouse.example/login")})],
    "explode": lambda name: [("work", None), ("fail", "the disk is full")],
    "abandon": lambda name: [("work", None), ("cancel", "the operator stopped it")],
    "forget": lambda name: [("forget", None)],
}


@dataclass
class Task:
    task_id: str
    tool: str
    name: str
    steps: list[Step]
    status: str = "working"
    asking: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    message: str | None = None

    def view(self, with_requests: bool) -> dict[str, Any]:
        data: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": "2026-07-28T00:00:00Z",
            "lastUpdatedAt": "2026-07-28T00:00:00Z",
            "ttlMs": 3_600_000,
            "pollIntervalMs": 20,
        }
        if self.message:
            data["statusMessage"] = self.message
        if self.status == "input_required" and with_requests:
            data["inputRequests"] = dict(self.asking)
        if self.result is not None:
            data["result"] = self.result
        if self.error is not None:
            data["error"] = self.error
        return data


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


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


class AnswerParams(TaskParams):
    input_responses: dict[str, Any]
    request_state: str | None = None


def build(shape: str = "2026-07-28") -> tuple[Server[Any], TaskBook]:
    book = TaskBook()

    async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        return ListToolsResult(tools=[Tool(name=n, description=f"{n} (a task)", input_schema=schema) for n in SCRIPTS])

    async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> dict[str, Any]:
        book.calls[params.name] += 1
        declared = ((params.meta or {}).get(CAPABILITIES) or {}).get("extensions") or {}
        if TASKS not in declared:
            raise MCPError(
                -32021, "Missing required client capability", {"requiredCapabilities": {"extensions": {TASKS: {}}}}
            )
        name = str((params.arguments or {}).get("name", "db"))
        task = Task(f"task-{len(book.tasks) + 1}", params.name, name, SCRIPTS[params.name](name))
        book.tasks[task.task_id] = task
        book.touch()
        return {"resultType": "task", **task.view(False)}

    def find(task_id: str) -> Task:
        task = book.tasks.get(task_id)
        if task is None or task.steps[:1] == [("forget", None)]:
            raise MCPError(INVALID_PARAMS, f"Unknown task {task_id}")
        return task

    def advance(task: Task) -> None:
        """One step of the script, when the task is not waiting for anyone."""
        if task.status != "working":
            return
        if not task.steps:
            task.status = "completed"
            said = ", ".join(f"{k}={v.get('content')}" for k, v in sorted(task.answers.items()))
            task.result = text(f"{task.tool} {task.name} done ({said}).")
            return
        kind, value = task.steps.pop(0)
        if kind == "ask":
            task.status, task.asking = "input_required", dict(value)
        elif kind == "fail":
            task.status, task.error = "failed", {"code": -32603, "message": value}
        elif kind == "cancel":
            task.status, task.message = "cancelled", value

    async def get(ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        task = find(params.task_id)
        advance(task)
        book.touch()
        return task.view(shape != "draft")

    def told(task: Task, responses: dict[str, Any]) -> None:
        for key, response in responses.items():
            if key not in task.asking:
                continue  # not outstanding: ignored, as the extension says
            task.answers[key] = response
            del task.asking[key]
            if response.get("action") != "accept":
                task.status = "completed"
                task.result = text(f"{task.tool} {task.name} stopped: the user chose {response.get('action')}.", True)
                return
        if not task.asking and task.status == "input_required":
            task.status = "working"

    async def update(ctx: ServerRequestContext, params: AnswerParams) -> dict[str, Any]:
        told(find(params.task_id), params.input_responses)
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
        told(task, params.input_responses)
        book.touch()
        return {}

    async def cancel(ctx: ServerRequestContext, params: TaskParams) -> dict[str, Any]:
        task = find(params.task_id)
        if task.status not in ("completed", "failed", "cancelled"):
            task.status, task.message = "cancelled", "cancelled by the client"
        book.cancelled.append(task.task_id)
        book.touch()
        return {}

    server: Server[Any] = Server(f"tasks-{shape}", on_list_tools=list_tools, on_call_tool=call_tool)
    server.extensions[TASKS] = {}
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
