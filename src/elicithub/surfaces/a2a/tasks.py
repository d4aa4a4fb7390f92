"""A2A tasks kept in the hub's own store, so a task outlives the process that started it like a run does.

Why not the SDK's `DatabaseTaskStore`: it needs SQLAlchemy on SQLite/Postgres/MySQL, while the hub's store may be
memory or Redis too. A task here is one protobuf blob under a key scoped to its owner (as the SDK's own stores
scope them), kept as long as conversations are.
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.errors import UnsupportedOperationError

from elicithub.core.ports import KeyValueStore


class HubTaskStore(TaskStore):
    """The SDK's `TaskStore` over the hub's key-value store (`backend.kv`)."""

    def __init__(self, kv: KeyValueStore, retention_s: float) -> None:
        self.kv = kv
        self.retention_s = retention_s

    @staticmethod
    def _key(task_id: str, context: ServerCallContext) -> str:
        return f"a2a-task:{resolve_user_scope(context)}:{task_id}"

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self.kv.put(self._key(task.id, context), task.SerializeToString(), self.retention_s)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        data = await self.kv.get(self._key(task_id, context))
        if data is None:
            return None
        task = Task()
        task.ParseFromString(data)
        return task

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        raise UnsupportedOperationError(message="ListTasks is not offered; use GetTask with a task's id.")

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self.kv.delete(self._key(task_id, context))
