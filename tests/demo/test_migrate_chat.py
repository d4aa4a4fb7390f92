"""`deploy.migrate` through a chat with the demo on: the hub follows the task, asks its confirmation (the question
names the task) and reports how the task ended; the demo server is then asked how it sees the task."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from elicithub.demo.migrate import PENDING
from elicithub.protocol.mcp_task_requests import Anything, GetTask, TasksClientExtension
from elicithub.protocol.mcp_tasks import TaskParams
from tests.conftest import HubFactory, RunningHub
from tests.server.test_chat_openai import run_answering
from tests.server.test_chat_ui_stream import UIStream, text_of, text_part, ui_body

MIGRATE = '/call deploy.migrate {"database": "orders-db"}'
STOPPED = "Migration of orders-db stopped: not confirmed, nothing was applied."


@pytest.fixture
def hub(make_hub: HubFactory) -> RunningHub:
    return make_hub(demo={"enabled": True})


def server_task(hub: RunningHub, task_id: str) -> dict[str, Any]:
    """The task as the demo's deploy server shows it."""
    [url] = [server.url for server in hub.hub.config.mcp_servers if server.id == "deploy"]

    async def get() -> dict[str, Any]:
        async with Client(
            streamable_http_client(str(url)), mode="2026-07-28", extensions=[TasksClientExtension()]
        ) as c:
            return (await c.session.send_request(GetTask(params=TaskParams(task_id=task_id)), Anything)).data()

    return asyncio.run(get())


def test_migrate_asks_for_confirmation_naming_its_task_and_finishes(hub: RunningHub) -> None:
    text, events = run_answering(hub, MIGRATE, [("accept", {"apply": True})])

    request = events[0]
    assert request["message"] == "Apply 3 pending migrations to orders-db?"
    context = request["context"]
    assert (context["serverId"], context["toolName"]) == ("deploy", "migrate")
    assert events[1]["outcome"] == "accepted"
    assert text == "Migrated orders-db: 3 migrations applied."
    assert server_task(hub, context["taskId"])["status"] == "completed"


def test_declined_migration_applies_nothing_and_its_task_ends_declined(hub: RunningHub) -> None:
    text, events = run_answering(hub, MIGRATE, [("decline", None)])

    assert events[1]["outcome"] == "declined"
    assert text == STOPPED
    task = server_task(hub, events[0]["context"]["taskId"])
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"] == STOPPED


def test_cancelled_question_cancels_the_migration_task(hub: RunningHub) -> None:
    text, events = run_answering(hub, MIGRATE, [("cancel", None)])

    assert events[1]["outcome"] == "cancelled"
    assert text == "Tool error: The user cancelled the question; deploy.migrate was cancelled."
    assert server_task(hub, events[0]["context"]["taskId"])["status"] == "cancelled"


def test_the_chat_stream_shows_each_status_message_of_the_task_once_while_it_works(hub: RunningHub) -> None:
    stream = UIStream(hub.client(), ui_body("conv-migrate-status", text_part(MIGRATE)))
    asking = stream.until("data-elicitation-request")
    [call] = [p["toolCallId"] for p in asking if p["type"] == "tool-input-available"]
    before = [p for p in asking if p["type"] == "data-tool-status"]
    assert [p["data"] for p in before] == [
        {"toolCallId": call, "message": "Connecting to orders-db"},
        {"toolCallId": call, "message": "Checking the schema of orders-db: 3 migrations pending"},
    ]
    assert {p["id"] for p in before} == {f"{call}-status"}  # one data part per call, which the latest replaces
    request = asking[-1]
    assert hub.answer("alice", "conv-migrate-status", request["id"], "accept", {"apply": True}).status_code == 200
    rest = stream.rest()
    stream.close()
    kinds = [p["type"] for p in rest]
    after = [p["data"]["message"] for p in rest if p["type"] == "data-tool-status"]
    assert after == [f"Applying {name}" for name in PENDING]
    assert kinds.index("tool-output-available") > max(i for i, kind in enumerate(kinds) if kind == "data-tool-status")
    assert text_of(rest) == "Migrated orders-db: 3 migrations applied."
