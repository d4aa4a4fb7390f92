"""Fixtures: official-SDK MCP servers in subprocesses, and the hub served by uvicorn, all on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn

from elicithub.config import Config, parse_config
from elicithub.core.elicitation import Elicitation
from elicithub.core.events import StreamEvent
from elicithub.runtime.conversations import Caller
from elicithub.server.app import create_app
from elicithub.server.hub import Hub

T = TypeVar("T")

pytest_plugins = ["tests.core_fixtures", "tests.models.hubs"]


# How `./scripts/test` spreads the suite over processes (pytest-xdist): a test file is one unit of work, so that the
# fixtures a module shares start once; the container tests (tests/deploy) are one unit between them, so that the
# hub's image is built once and the containers run on one worker while the others run the rest. The longest units
# go first (longest-first keeps one worker from finishing a long unit alone at the end).
FIRST = (
    "tests/deploy/",
    "tests/server/test_durable.py",
    "tests/server/test_store_copy.py",
    "tests/bench/",
    "tests/triggers/test_mcp_tasks_durable.py",
    "tests/web/",
    "tests/testing/test_plugin.py",
    "tests/server/test_scale_out.py",
    "tests/demo/test_service.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, first in enumerate(FIRST) if path.startswith(first)), len(FIRST))

    items.sort(key=rank)  # stable: within a rank, as collected


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown when it is not loaded (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/deploy/" if path.startswith("tests/deploy/") else path

    config.option.loadscopereorder = False  # the order above, not the files with the most tests first
    return ByFile(config, log)


SERVERS = Path(__file__).parent / "servers"
USERS = [{"id": "alice", "token": "alice-secret"}, {"id": "bob", "token": "bob-secret-1"}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def eventually(condition: Callable[[], bool], what: str, deadline_s: float = 60) -> None:
    """Until `condition` holds (state another thread or process reaches); the deadline only ends a test that would
    hang, naming `what` never happened."""
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, what
        time.sleep(0.01)


class ServedInThread:
    """An ASGI app served by uvicorn on 127.0.0.1 in a thread of the test process, listening once made."""

    def __init__(self, app: Any, port: int | None = None, **options: Any) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", **options)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_for_port(self.port)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the served app's own event loop: its stores belong to that loop (the SQLite store batches
        every statement of a loop turn), so a test reads them there, never from a loop of its own."""
        loop = self.server.servers[0].get_loop()
        return asyncio.run_coroutine_threadsafe(work, loop).result(timeout=60)


@contextmanager
def served(app: Any, port: int | None = None, **options: Any) -> Iterator[ServedInThread]:
    """`app` served in a thread for the block."""
    server = ServedInThread(app, port, **options)
    try:
        yield server
    finally:
        server.stop()


class McpProcess:
    def __init__(self, script: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, str(SERVERS / script), str(self.port)])
        wait_for_port(self.port)
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="session")
def legacy_server() -> Iterator[McpProcess]:
    server = McpProcess("legacy_server.py")
    yield server
    server.kill()


@pytest.fixture(scope="session")
def mrtr_server() -> Iterator[McpProcess]:
    server = McpProcess("mrtr_server.py")
    yield server
    server.kill()


class HubAddress:
    """Where a hub listens, with clients for the test users."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def client(self, user: str | None = "alice") -> httpx.Client:
        headers = {"x-supports-elicitation": "true"}
        if user is not None:
            headers["authorization"] = f"Bearer {next(u['token'] for u in USERS if u['id'] == user)}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def answer(
        self, user: str, conversation_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> httpx.Response:
        body = {"conversationId": conversation_id, "elicitationId": elicitation_id, "action": action}
        if content is not None:
            body["content"] = content
        with self.client(user) as client:
            return client.post("/run/api/elicitation-responses", json=body)


class RunningHub(HubAddress):
    """The hub served by uvicorn in a thread of the test process."""

    def __init__(self, config: Config, port: int | None = None) -> None:
        super().__init__(port or free_port())
        self.config = config
        # Named like `elicithub serve` names itself (host:port), so a hub restarted on this port is the same one.
        self.hub = Hub(config, instance=f"127.0.0.1:{self.port}")
        # As `elicithub serve` runs it: uvicorn trusts the forwarding headers of the proxies the hub trusts alone.
        self.served = ServedInThread(
            create_app(config, self.hub), self.port, forwarded_allow_ips=config.server.trusted_proxies
        )

    def stop(self) -> None:
        self.served.stop()

    def on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` (e.g. a read of the hub's stores) on the hub's own event loop."""
        return self.served.on_loop(work)

    def run_ended(self, elicitation_id: str) -> tuple[Elicitation, list[StreamEvent]]:
        """Once the run that asked `elicitation_id` has ended: the question as stored then, and the run's events up
        to its RunFinished (read from its conversation's log, so the end is waited for, never slept on)."""

        async def read() -> tuple[Elicitation, list[StreamEvent]]:
            asked = await self.hub.store.get(elicitation_id)
            assert asked is not None, elicitation_id
            caller = Caller(asked.user_id)
            following = await self.hub.conversations.follow(caller, asked.conversation_id, asked.run_id, 0)
            events = [event async for _, event in following.events]
            ended = await self.hub.store.get(elicitation_id)
            assert ended is not None
            return ended, events

        return self.on_loop(read())

    def downstream_calls(self, tool: str, name: str) -> int:
        """How many `tools/call` requests the `mrtr` server has had for `tool` with argument `name`."""
        url = next(s.url for s in self.config.mcp_servers if s.id == "mrtr")
        assert url is not None
        called: dict[str, int] = httpx.get(url.removesuffix("/mcp") + "/debug/called").json()
        return called.get(f"{tool}:{name}", 0)


HubFactory = Callable[..., RunningHub]


@pytest.fixture
def make_hub(legacy_server: McpProcess, mrtr_server: McpProcess, tmp_path: Path) -> Iterator[HubFactory]:
    hubs: list[RunningHub] = []

    def make(port: int | None = None, **overrides: Any) -> RunningHub:
        port = port or free_port()
        data: dict[str, Any] = {
            "public_url": f"http://127.0.0.1:{port}",
            "store": {"url": f"sqlite:///{tmp_path / 'hub.db'}"},
            "secrets": {"key_file": str(tmp_path / "secret.key")},
            "users": USERS,
            "mcp_servers": [
                {"id": "legacy", "url": legacy_server.url, "protocol": "legacy"},
                {"id": "mrtr", "url": mrtr_server.url},
            ],
        }
        data.update(overrides)
        hub = RunningHub(parse_config(data), port)
        hubs.append(hub)
        return hub

    yield make
    for hub in hubs:
        hub.stop()


@pytest.fixture
def hub(make_hub: HubFactory) -> RunningHub:
    return make_hub()


def sse_data(response: httpx.Response) -> Iterator[Any]:
    """The JSON payloads of an SSE response, in order; `[DONE]` ends it."""
    for line in response.iter_lines():
        if line.startswith("data: "):
            payload = line.removeprefix("data: ")
            if payload == "[DONE]":
                return
            yield json.loads(payload)


def sse_numbered(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    """The JSON payloads of an SSE response with the `id` each was sent with ("" for none); `[DONE]` ends it."""
    event_id = ""
    for line in response.iter_lines():
        if line == "":
            event_id = ""
        elif line.startswith("id: "):
            event_id = line.removeprefix("id: ")
        elif line.startswith("data: "):
            payload = line.removeprefix("data: ")
            if payload == "[DONE]":
                return
            yield event_id, json.loads(payload)
