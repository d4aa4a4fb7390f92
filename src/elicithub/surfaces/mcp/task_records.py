"""The hub's own MCP tasks as its store keeps them: which run a task is, whose it is, and what it ended with.

A task is one JSON record under a key scoped to its user (`mcp-task:USER:ID`), kept as long as conversations are, so
any instance sharing the store finds it, and another user's id finds nothing. Its status is not stored while the run
goes on: it is read from the run and its open questions each time (surfaces/mcp/tasks.py); only its end is kept once
seen, and a cancellation asked for. A per-user list of ids (`mcp-tasks:USER`, an entry per task that expires with
it, added in one store step so that tasks created at once are all listed) serves 2025-11-25's `tasks/list`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypedDict

from elicithub.core.elicitation import new_id
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import Entry, KeyValueStore
from elicithub.protocol.mcp_tasks import Status, TaskError


class TaskEnd(TypedDict):
    """How a task ended, kept once seen: a completed one's `result` (a `CallToolResult`), a failed one's `error`."""

    status: Status
    result: JsonObject | None
    error: TaskError | None


@dataclass(frozen=True)
class TaskRecord:
    task_id: str
    user_id: str
    conversation_id: str
    run_id: str
    after: int  # the conversation's log position where the run starts
    modes: list[str]  # the questions the client can show
    created_at: float
    ttl_s: float
    cancelled: bool = False
    ended: TaskEnd | None = None  # once seen
    direct: bool = False  # a direct call's: its result is its server's
    updated_at: float = field(default_factory=time.time)

    def with_(self, **changes: Any) -> TaskRecord:
        return replace(self, updated_at=time.time(), **changes)


class TaskRecords:
    def __init__(self, kv: KeyValueStore, retention_s: float) -> None:
        self.kv = kv
        self.retention_s = retention_s

    async def create(
        self, user_id: str, conversation_id: str, run_id: str, after: int, modes: set[str], direct: bool = False
    ) -> TaskRecord:
        """A new task, durable once this returns (a `tasks/get` for it resolves on any instance)."""
        task_id, now = new_id("task"), time.time()
        record = TaskRecord(
            task_id, user_id, conversation_id, run_id, after, sorted(modes), now, self.retention_s, direct=direct
        )
        await self.save(record)
        await self.kv.add_entry(_list_key(user_id), task_id, self.retention_s)
        return record

    async def save(self, record: TaskRecord) -> None:
        left = record.created_at + record.ttl_s - time.time()
        await self.kv.put(_key(record.user_id, record.task_id), json.dumps(asdict(record)).encode(), max(left, 1))

    async def get(self, user_id: str, task_id: str) -> TaskRecord | None:
        """The user's task; another user's, or one no longer kept: None."""
        data = await self.kv.get(_key(user_id, task_id))
        return None if data is None else TaskRecord(**json.loads(data))

    async def listed(self, user_id: str, limit: int, before: Entry | None = None) -> list[Entry]:
        """The user's tasks' ids (`value`), newest first, from just after `before` (a task may be gone since)."""
        return await self.kv.entries(_list_key(user_id), limit, before)


def _key(user_id: str, task_id: str) -> str:
    return f"mcp-task:{user_id}:{task_id}"


def _list_key(user_id: str) -> str:
    return f"mcp-tasks:{user_id}"
