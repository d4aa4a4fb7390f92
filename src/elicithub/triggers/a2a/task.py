"""One downstream A2A task, over the a2a-sdk client: send, read, follow until it moves, cancel."""

from __future__ import annotations

import asyncio
import contextlib

from a2a.client import Client, ClientCallContext
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
INTERRUPTED = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}

POLL_S = 1.0
"""Between two looks at a task whose subscription ended without it moving (a stream cut, a read timeout)."""


class TaskLink:
    """The calls of one tool call to one agent, each with the call's headers and deadline.

    Messages go by blocking `SendMessage` (`client`), which returns when the task ends or asks; `watcher`, a streaming
    client for an agent whose card says it streams, follows a task with `SubscribeToTask` (else GetTask polls).
    """

    def __init__(self, client: Client, watcher: Client | None, context: ClientCallContext) -> None:
        self.client = client
        self.watcher = watcher
        self.context = context

    async def send(self, message: Message) -> Task | Message:
        """Send and wait (blocking `SendMessage`) until the task ends or asks; a plain reply comes back as such."""
        async for response in self.client.send_message(SendMessageRequest(message=message), context=self.context):
            if response.HasField("message"):
                return response.message
            return response.task
        raise A2AError("the agent sent no response")

    async def get(self, task_id: str) -> Task:
        return await self.client.get_task(GetTaskRequest(id=task_id), context=self.context)

    async def cancel(self, task: Task) -> None:
        """Cancel the task; one that ended meanwhile, or an agent gone, leaves nothing to cancel."""
        with contextlib.suppress(A2AError, OSError, TimeoutError):
            await self.client.cancel_task(CancelTaskRequest(id=task.id), context=self.context)

    async def follow(self, task: Task) -> Task:
        """The task once it has left the state it is in now (`SubscribeToTask`, then `GetTask` for the whole task).

        Unbounded by itself: the caller sets the deadline.
        """
        waiting = task.status.state
        while True:
            if self.watcher is not None:
                await self._subscribe(self.watcher, task.id, waiting)
            current = await self.get(task.id)
            if current.status.state != waiting:
                return current
            await asyncio.sleep(POLL_S)

    async def _subscribe(self, watcher: Client, task_id: str, waiting: TaskState) -> None:
        """Until the task leaves `waiting`, or the stream ends or breaks."""
        with contextlib.suppress(A2AError, TimeoutError):
            # A finished task cannot be subscribed to (UnsupportedOperation): GetTask then says how it ended.
            async for response in watcher.subscribe(SubscribeToTaskRequest(id=task_id), context=self.context):
                state = _state(response)
                if state is not None and state != waiting:
                    return


def _state(response: StreamResponse) -> TaskState | None:
    if response.HasField("task"):
        return response.task.status.state
    if response.HasField("status_update"):
        return response.status_update.status.state
    return None
