"""MCP tasks on the wire, as the hub's client sends them: the requests of both shapes (with the earlier draft some
servers still speak) over the shapes both sides share (elicithub.protocol.mcp_tasks), and the extension declared on
every request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import mcp_types as mt
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import BaseModel, ConfigDict

from elicithub.core.jsoncodec import JsonObject
from elicithub.protocol.mcp_tasks import TASKS_EXTENSION, TaskHandle, TaskParams, UpdateParams


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

    def data(self) -> JsonObject:
        return dict(self.model_extra or {})


async def _not_followed_here(handle: TaskHandle, ctx: ClaimContext) -> mt.CallToolResult:
    raise RuntimeError("the hub follows its tasks itself (triggers/mcp/tasks.py), never through Client.call_tool")


class TasksClientExtension(ClientExtension):
    """Declares the extension on every request (the server alone decides whether a call becomes a task) and lets
    the session parse a `resultType: "task"` answer, which the hub's `session.call_tool(allow_claimed=True)` gets."""

    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=_not_followed_here),)
