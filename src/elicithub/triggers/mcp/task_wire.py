"""MCP tasks on the wire, as the hub's client sends and reads them: the 2026-07-28 extension
`io.modelcontextprotocol/tasks` (with the earlier draft some servers still speak) and the 2025-11-25 core tasks.
The SDK has the 2025-11-25 types only; the 2026 shapes are modelled here on its base types."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import mcp_types as mt
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
UNKNOWN_TASK = mt.INVALID_PARAMS
"""What a server answers `tasks/get` for a task it does not know (or no longer keeps)."""

Status = Literal["working", "input_required", "completed", "cancelled", "failed"]
TERMINAL = frozenset({"completed", "cancelled", "failed"})


class TaskHandle(mt.Result):
    """A 2026-07-28 `tools/call` answered with a task (`resultType: "task"`)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: Status = "working"
    status_message: str | None = None
    poll_interval_ms: int | None = None


class TaskSnapshot(BaseModel):
    """A task as `tasks/get` shows it, in either shape (2025-11-25 names its interval `pollInterval`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    task_id: str
    status: Status
    status_message: str | None = None
    poll_interval_ms: int | None = None
    poll_interval: int | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def interval_ms(self) -> int | None:
        return self.poll_interval_ms if self.poll_interval_ms is not None else self.poll_interval


class TaskParams(mt.RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: mt.InputResponses


class InputResponseParams(UpdateParams):
    request_state: str | None = None


class _TaskRequest(mt.Request[TaskParams, Any]):
    # Every tasks/* request names its task in `Mcp-Name`, so a load balancer can route it by task (SEP-2663).
    name_param = "taskId"


class GetTask(_TaskRequest):
    method: Literal["tasks/get"] = "tasks/get"


class CancelTask(_TaskRequest):
    method: Literal["tasks/cancel"] = "tasks/cancel"


class TaskResult(_TaskRequest):
    """2025-11-25, and the earlier draft's way to read a round's questions."""

    method: Literal["tasks/result"] = "tasks/result"


class UpdateTask(mt.Request[UpdateParams, Literal["tasks/update"]]):
    name_param = "taskId"
    method: Literal["tasks/update"] = "tasks/update"


class InputResponse(mt.Request[InputResponseParams, Literal["tasks/input_response"]]):
    """The earlier draft's answer to a round, echoing its `requestState`."""

    name_param = "taskId"
    method: Literal["tasks/input_response"] = "tasks/input_response"


class Anything(BaseModel):
    """A result read as it came: the tasks/* results are checked by whoever reads them."""

    model_config = ConfigDict(extra="allow")

    def data(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


async def _not_followed_here(handle: TaskHandle, ctx: ClaimContext) -> mt.CallToolResult:
    raise RuntimeError("the hub follows its tasks itself (triggers/mcp/tasks.py), never through Client.call_tool")


class TasksExtension(ClientExtension):
    """Declares the extension on every request (the server alone decides whether a call becomes a task) and lets
    the session parse a `resultType: "task"` answer, which the hub's `session.call_tool(allow_claimed=True)` gets."""

    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=_not_followed_here),)
