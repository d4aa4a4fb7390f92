"""A downstream task outlives the hub that started it, in either shape: kill -9 while the task waits for the
person, answer on another instance, and that instance finishes the same task (the server saw one tools/call)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import USERS, served
from tests.server.test_durable import Serve, reattached_text, serve, store_url, ui_body
from tests.servers.core_tasks_server import build as build_core
from tests.servers.tasks_server import TaskBook, build

__all__ = ["serve"]

ALICE = {"authorization": "Bearer alice-secret", "x-supports-elicitation": "true"}


@pytest.fixture
def tasks_url() -> Iterator[tuple[str, TaskBook]]:
    server, book = build()
    with served(server.streamable_http_app()) as running:
        yield f"{running.url}/mcp", book


@pytest.fixture
def core_tasks_url() -> Iterator[tuple[str, TaskBook]]:
    server, book = build_core()
    with served(server.streamable_http_app()) as running:
        yield f"{running.url}/mcp", book


def write_config(path: Path, store: str, request: pytest.FixtureRequest, server: dict[str, str]) -> Path:
    config = path / "hub.yaml"
    data = {
        "store": {"url": store_url(store, path, request, db=4), "heartbeat_s": 0.3},
        "secrets": {"key_file": str(path / "secret.key")},
        "users": USERS,
        "mcp_servers": [server],
    }
    config.write_text(json.dumps(data))
    return config


async def ask(url: str, conversation: str, text: str) -> dict[str, str]:
    """Start a chat and read it until its question; then hang up."""
    async with (
        httpx.AsyncClient(base_url=url, headers=ALICE, timeout=60) as client,
        client.stream("POST", "/run/api/chat", json=ui_body(conversation, {"type": "text", "text": text})) as r,
    ):
        async for line in r.aiter_lines():
            if '"data-elicitation-request"' in line:
                event = json.loads(line.removeprefix("data: "))["data"]
                assert event["context"]["taskId"] == "task-1"
                return {"conversation": conversation, "elicitation": event["elicitationId"]}
    raise AssertionError(f"no question in {conversation}")


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_kill_9_while_a_task_waits_then_another_instance_finishes_it(
    store: str, serve: Serve, tmp_path: Path, tasks_url: tuple[str, TaskBook], request: pytest.FixtureRequest
) -> None:
    url, book = tasks_url
    config = write_config(tmp_path, store, request, {"id": "wh", "url": url})
    first = serve(config, "first")
    asked = asyncio.run(ask(first.url, "conv-task", '/call wh.migrate {"name": "orders"}'))
    first.process.kill()  # SIGKILL: nothing cancelled, the task still waits downstream
    first.process.wait()

    second = serve(config, "second")
    try:
        statuses = asyncio.run(confirm(second.url, asked))
        assert statuses == [200]
        assert reattached_text(second.url, "conv-task") == "migrate orders done (confirm={'confirm': True})."
        assert book.calls["migrate"] == 1
        assert list(book.tasks) == ["task-1"]
    finally:
        second.stop()


async def confirm(url: str, asked: dict[str, str]) -> list[int]:
    body = {
        "conversationId": asked["conversation"],
        "elicitationId": asked["elicitation"],
        "action": "accept",
        "content": {"confirm": True},
    }
    async with httpx.AsyncClient(base_url=url, headers=ALICE, timeout=60) as client:
        return [(await client.post("/run/api/elicitation-responses", json=body)).status_code]


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_kill_9_while_a_2025_11_25_task_waits_then_another_instance_finishes_it(
    store: str, serve: Serve, tmp_path: Path, core_tasks_url: tuple[str, TaskBook], request: pytest.FixtureRequest
) -> None:
    url, book = core_tasks_url
    config = write_config(tmp_path, store, request, {"id": "wh", "url": url, "protocol": "legacy"})
    first = serve(config, "first")
    asked = asyncio.run(ask(first.url, "conv-core-task", '/call wh.migrate {"name": "orders"}'))
    first.process.kill()  # the tasks/result stream the question came on dies with it; the task still waits
    first.process.wait()

    second = serve(config, "second")
    try:
        statuses = asyncio.run(confirm(second.url, asked))
        assert statuses == [200]
        assert reattached_text(second.url, "conv-core-task") == "migrate orders done ({'confirm': True})."
        assert book.calls["migrate"] == 1
        assert book.cancelled == []
    finally:
        second.stop()
