"""The demo's scripted MCP tasks: what `tasks/get` shows of one is a task in its named shape at every step, from
working through a question to its end."""

from __future__ import annotations

from typing import Any

from elicithub.demo.tasks import Task, form, text
from elicithub.protocol.mcp_tasks import TaskError, TaskJson
from tests.shapes import assert_shaped

CONFIRM = form("Go on?", {"type": "object", "properties": {"go": {"type": "boolean"}}})


def scripted(*steps: tuple[str, Any]) -> Task:
    return Task("task-1", list(steps), lambda _: text("done"), lambda _task, _response: None)


def test_a_tasks_view_has_the_keys_of_its_shape_at_every_step() -> None:
    task = scripted(("work", "warming up"), ("ask", {"confirm": CONFIRM}))
    seen = [task.view()]
    for _ in range(2):
        task.advance()
        seen.append(task.view())
    assert [v["status"] for v in seen] == ["working", "working", "input_required"]
    assert seen[1]["statusMessage"] == "warming up" and seen[2]["inputRequests"] == {"confirm": CONFIRM}
    assert "inputRequests" not in task.view(with_requests=False)
    task.told({"confirm": {"action": "accept", "content": {"go": True}}})
    task.advance()
    seen.append(task.view())
    assert seen[-1]["status"] == "completed" and seen[-1]["result"] == text("done")
    for view in seen:
        assert_shaped(view, TaskJson)


def test_a_failed_tasks_error_has_the_keys_of_its_shape() -> None:
    task = scripted(("fail", "the disk is full"))
    task.advance()
    view = task.view()
    assert view["status"] == "failed"
    assert_shaped(view, TaskJson)
    assert_shaped(view["error"], TaskError)
    assert view["error"]["message"] == "the disk is full"
