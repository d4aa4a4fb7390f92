"""MCP tasks on the wire, as both sides of the hub speak them: the 2026-07-28 extension `io.modelcontextprotocol/tasks`
and the 2025-11-25 core tasks. The hub follows downstream servers' tasks (triggers/mcp/tasks.py) and serves its own
agents' calls as tasks (surfaces/mcp/tasks.py). The SDK has the 2025-11-25 types only; the 2026 shapes are modelled
here on its base types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

import mcp_types as mt
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from elicithub.core.jsoncodec import JsonObject

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
UNKNOWN_TASK = mt.INVALID_PARAMS
"""What a server answers a tasks/* request for a task it does not know (or no longer keeps)."""

Status = Literal["working", "input_required", "completed", "cancelled", "failed"]
TERMINAL = frozenset({"completed", "cancelled", "failed"})


class TaskError(TypedDict):
    """Why a task failed, as the hub's tasks tell it (a JSON-RPC error object; another server's may carry more)."""

    code: int
    message: str


class TaskJson(TypedDict):
    """A 2026-07-28 task as JSON, for a server that writes it by hand (demo/tasks.py): what its task handle and its
    `tasks/get` answers carry besides `resultType` (a `DetailedTask`'s fields, camel-cased, none of them null)."""

    taskId: str
    status: Status
    createdAt: str
    lastUpdatedAt: str
    ttlMs: int
    pollIntervalMs: int
    statusMessage: NotRequired[str]
    inputRequests: NotRequired[JsonObject]
    result: NotRequired[JsonObject]
    error: NotRequired[TaskError]


class Task(mt.Result):
    """A 2026-07-28 task, as a `CreateTaskResult` and `tasks/get` carry it (2025-11-25's is `mt.Task`)."""

    task_id: str
    status: Status = "working"
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskHandle(Task):
    """A 2026-07-28 `tools/call` answered with a task (`resultType: "task"`)."""

    result_type: Literal["task"] = "task"


class DetailedTask(Task):
    """A 2026-07-28 `tasks/get` answer: the task, with what its status carries."""

    result_type: Literal["complete"] = "complete"
    input_requests: JsonObject | None = None
    result: JsonObject | None = None
    error: Mapping[str, Any] | None = None  # a TaskError: pydantic reads no typing.TypedDict on Python 3.11


class TaskSnapshot(BaseModel):
    """A task as `tasks/get` shows it, read in either shape (2025-11-25 names its interval `pollInterval`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    task_id: str
    status: Status
    status_message: str | None = None
    poll_interval_ms: int | None = None
    poll_interval: int | None = None
    input_requests: JsonObject | None = None
    result: JsonObject | None = None
    error: JsonObject | None = None

    @property
    def interval_ms(self) -> int | None:
        return self.poll_interval_ms if self.poll_interval_ms is not None else self.poll_interval


class TaskParams(mt.RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: mt.InputResponses
