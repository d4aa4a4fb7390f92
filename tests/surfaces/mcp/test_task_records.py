"""The hub's own MCP tasks as the store keeps them: a task's end reads back as it was kept, in its shape, and only
for its own user."""

from __future__ import annotations

import asyncio

import mcp_types as mt

from elicithub.protocol.mcp_tasks import TaskError
from elicithub.store.memory.kv import MemoryKv
from elicithub.surfaces.mcp.task_records import TaskEnd, TaskRecords
from tests.shapes import assert_shaped


def test_a_task_end_reads_back_as_kept_in_its_shape_for_its_user_only() -> None:
    async def scenario() -> None:
        records = TaskRecords(MemoryKv(), retention_s=600)
        record = await records.create("alice", "conv", "run_1", 0, {"url", "form"})
        end: TaskEnd = {"status": "failed", "result": None, "error": {"code": mt.INTERNAL_ERROR, "message": "gone"}}
        await records.save(record.with_(ended=end))
        found = await records.get("alice", record.task_id)
        assert found is not None and found.ended == end and found.modes == ["form", "url"]
        assert_shaped(found.ended, TaskEnd)
        assert found.ended["error"] is not None
        assert_shaped(found.ended["error"], TaskError)
        assert await records.get("bob", record.task_id) is None

    asyncio.run(scenario())
