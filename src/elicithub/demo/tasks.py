"""Scripted MCP tasks (the 2026-07-28 extension `io.modelcontextprotocol/tasks`) for demo and test servers.

The SDK has no tasks runtime, so a task here is a script of steps advanced one per `tasks/get`: its pace is the
client's polling, a client always sees it working at least once, and nothing waits on a clock. `TaskTools` serves
such tasks from an `MCPServer` as an SDK extension."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ToolBinding
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, RequestParams
from pydantic import ConfigDict

from elicithub.core.jsoncodec import JsonObject
from elicithub.protocol.mcp_tasks import TASKS_EXTENSION, TERMINAL, UNKNOWN_TASK, Status, TaskError, TaskJson

Step = tuple[str, Any]
"""("work", status message | None) | ("ask", {key: request}) | ("fail", message) | ("cancel", message)."""
Finish = Callable[["Task"], JsonObject]
"""The task's result once its script has run out."""
Judge = Callable[["Task", JsonObject], JsonObject | None]
"""What an answer means: None to go on, or the result that ends the task there (a declined confirmation)."""


def form(message: str, schema: JsonObject) -> JsonObject:
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def text(value: str, error: bool = False) -> JsonObject:
    return {"content": [{"type": "text", "text": value}], "isError": error}


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request declared the extension (per request): only then may it be answered with a task."""
    capabilities = ctx.session.client_capabilities
    return TASKS_EXTENSION in ((capabilities.extensions if capabilities else None) or {})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Task:
    """One task: what is left of its script, what it asks now, what it was told, and how it ended."""

    task_id: str
    steps: list[Step]
    finish: Finish
    judge: Judge
    poll_ms: int = 20
    status: Status = "working"
    asking: JsonObject = field(default_factory=dict)
    answers: dict[str, JsonObject] = field(default_factory=dict)
    result: JsonObject | None = None
    error: TaskError | None = None
    message: str | None = None
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)

    def view(self, with_requests: bool = True) -> TaskJson:
        """The task as `tasks/get` shows it (`with_requests=False`: without the outstanding requests)."""
        data: TaskJson = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": 3_600_000,
            "pollIntervalMs": self.poll_ms,
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

    def advance(self) -> None:
        """One step of the script, when the task is not waiting for anyone."""
        if self.status != "working":
            return
        self.updated_at = _now()
        if not self.steps:
            self.status, self.message, self.result = "completed", None, self.finish(self)
            return
        kind, value = self.steps.pop(0)
        if kind == "work":
            self.message = value
        elif kind == "ask":
            self.status, self.asking, self.message = "input_required", dict(value), None
        elif kind == "fail":
            self.status, self.error = "failed", {"code": -32603, "message": value}
        elif kind == "cancel":
            self.status, self.message = "cancelled", value

    def told(self, responses: JsonObject) -> None:
        """Takes the answers to outstanding requests (others are ignored, as the extension says)."""
        for key, response in responses.items():
            if key not in self.asking:
                continue
            self.answers[key] = response
            del self.asking[key]
            self.updated_at = _now()
            stopped = self.judge(self, response)
            if stopped is not None:
                self.status, self.asking, self.message, self.result = "completed", {}, None, stopped
                return
        if not self.asking and self.status == "input_required":
            self.status = "working"

    def cancel(self) -> None:
        if self.status not in TERMINAL:
            self.status, self.asking, self.message, self.updated_at = "cancelled", {}, "cancelled by the client", _now()


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


class AnswerParams(TaskParams):
    input_responses: JsonObject
    request_state: str | None = None


Start = Callable[[JsonObject, str], Task]
"""Starts a tool's task from the call's arguments and a fresh task id."""


class TaskTools(Extension):
    """Tools that run only as tasks on an `MCPServer`: a call that declared the extension gets a task handle and
    `tasks/get`, `tasks/update`, `tasks/cancel` follow it; any other call reaches the tool's own function."""

    identifier = TASKS_EXTENSION

    def __init__(self, tools: Sequence[ToolBinding], starts: dict[str, Start]) -> None:
        self._tools = tuple(tools)
        self.starts = starts
        self.tasks: dict[str, Task] = {}

    def tools(self) -> Sequence[ToolBinding]:
        return self._tools

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskParams, self._get),
            MethodBinding("tasks/update", AnswerParams, self._update),
            MethodBinding("tasks/cancel", TaskParams, self._cancel),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        start = self.starts.get(params.name)
        if start is None or not declares_tasks(ctx):
            return await call_next(ctx)
        task = start(dict(params.arguments or {}), uuid.uuid4().hex[:12])
        self.tasks[task.task_id] = task
        return {"resultType": "task", **task.view(with_requests=False)}

    def find(self, task_id: str) -> Task:
        task = self.tasks.get(task_id)
        if task is None:
            raise MCPError(UNKNOWN_TASK, f"Unknown task {task_id}")
        return task

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        task = self.find(params.task_id)
        task.advance()
        return {"resultType": "complete", **task.view()}

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: AnswerParams) -> HandlerResult:
        self.find(params.task_id).told(params.input_responses)
        return {"resultType": "complete"}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        self.find(params.task_id).cancel()
        return {"resultType": "complete"}
