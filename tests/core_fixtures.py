"""Fixtures and values shared by the core and store tests: the anyio backend, the three stores (with a real
redis-server), one form schema, and the one way tests make an elicitation."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis

from elicithub.core.bus import EventBus
from elicithub.core.elicitation import Elicitation, new_elicitation
from elicithub.core.events import StreamEvent
from elicithub.core.ports import Backend
from elicithub.core.ports import ElicitationStore as Store
from elicithub.store import MemoryElicitations, RedisElicitations, SqliteElicitations, open_backend
from tests.conftest import free_port, wait_for_port

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "enum": ["eu", "us"]},
        "replicas": {"type": "integer", "minimum": 1},
    },
    "required": ["region"],
}

_runs = itertools.count(1)


def question(timeout_s: float = 60, *, at: datetime | None = None, **fields: Any) -> Elicitation:
    """A question as the hub makes one (`new_elicitation`), open for `timeout_s`: a form ("Which region?", SCHEMA)
    from an MCP tool to alice in conv_1, in a run of its own. `fields` are new_elicitation's; a `url` makes it a
    sign-in (url mode, no schema). `at` fixes when it was made, for tests with a clock of their own."""
    sign_in = fields.get("url") is not None
    made = new_elicitation(
        timeout_s=timeout_s,
        **{
            "conversation_id": "conv_1",
            "user_id": "alice",
            "run_id": f"run_{next(_runs)}",
            "mode": "url" if sign_in else "form",
            "message": "Which region?",
            "requested_schema": None if sign_in else SCHEMA,
            "context": {"trigger": "mcp_elicitation", "serverId": "deploy", "toolName": "provision"},
            **fields,
        },
    )
    return made if at is None else replace(made, created_at=at, expires_at=at + timedelta(seconds=timeout_s))


class RedisServer:
    """A real redis-server on a free port of 127.0.0.1, started for the test session."""

    def __init__(self, workdir: Path, *persistence: str) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed; the Redis tests need it (apt install redis-server)")
        self.port = free_port()
        settings = persistence or ("--save", "", "--appendonly", "no")
        command = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(workdir), *settings]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        wait_for_port(self.port)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.url(db), decode_responses=True)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """Database 0 of the session's redis-server, emptied for this test."""
    with redis_server.client() as client:
        client.flushdb()
    return redis_server.url()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store
    if request.param == "memory":
        opened = MemoryElicitations()
    elif request.param == "sqlite":
        opened = SqliteElicitations(tmp_path / "hub.db")
    else:
        opened = RedisElicitations(request.getfixturevalue("redis_url"))
    yield opened
    await opened.close()


class BusSink:
    """The broker's event sink, in memory: each run's events on an EventBus keyed by run id, for tests to read."""

    def __init__(self) -> None:
        self.bus: EventBus[StreamEvent] = EventBus()

    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
        self.bus.publish(elicitation.run_id, event)


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each backend, as `open_backend` makes it (Redis: database 0 of the session's redis-server, emptied)."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'hub.db'}"
    else:
        url = request.getfixturevalue("redis_url")
    opened = open_backend(url, events_max_len=100)
    yield opened
    await opened.close()


async def until(condition: Callable[[], bool], timeout_s: float = 10) -> None:
    """Until `condition` holds: for state another task reaches through I/O, which offers no event to wait on. The
    deadline only ends a test that would hang; nothing here depends on how fast the machine is."""
    with anyio.fail_after(timeout_s):
        while not condition():  # noqa: ASYNC110 - the condition is read from the broker, which has no event for it
            await asyncio.sleep(0.001)
