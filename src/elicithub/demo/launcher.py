"""Start the demo servers (tracker, deploy, release; the travel A2A agent) on loopback inside the running event loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.types import ASGIApp

from elicithub.demo.addresses import base_url

if TYPE_CHECKING:
    from elicithub.demo.tracker import Tracker

_STARTUP_TIMEOUT_S = 10.0
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Demo:
    """The running demo servers. URLs are the MCP endpoints; `tracker_issuer` is its OAuth issuer."""

    tracker_url: str
    deploy_url: str
    release_url: str
    tracker_issuer: str
    tracker: Tracker
    travel_url: str = ""  # the travel A2A agent (its card is under it)

    def mcp_servers(self) -> list[dict[str, Any]]:
        """The servers as entries of the hub's `mcp_servers` config."""
        return demo_entries(self.tracker_url, self.deploy_url, self.release_url)


TRACKER_TOOLS: list[dict[str, Any]] = [
    {"name": "list_issues", "description": "List the issues in your tracker account."},
    {
        "name": "create_issue",
        "description": "Open an issue in your tracker account.",
        "input_schema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title"],
        },
    },
]
"""The tracker's tools, offered before anyone has signed in (a user-scoped server cannot be listed without a token)."""


def demo_entries(tracker_url: str, deploy_url: str, release_url: str) -> list[dict[str, Any]]:
    """The hub's `mcp_servers` entries for demo servers at these URLs."""
    return [
        {"id": "tracker", "url": tracker_url, "credential_scope": "user", "tools": TRACKER_TOOLS},
        {"id": "deploy", "url": deploy_url, "protocol": "2026-07-28"},
        {"id": "release", "url": release_url, "protocol": "legacy"},
    ]


def demo_agents(own: list[str]) -> list[dict[str, Any]]:
    """The demo's agents: the assistant uses every demo tool and the `own` servers and A2A agents of the config (the
    demo adds tools, never hides one), and may delegate to the planner, which uses travel."""
    demo = ["tracker", "deploy", "release", "travel", "planner"]
    return [
        {"id": "assistant", "tools": [*demo, *(i for i in own if i not in demo)]},
        {"id": "planner", "description": "Plans a trip: asks the travel agent to book it.", "tools": ["travel"]},
    ]


SUGGESTIONS = [
    {"label": "Deploy a service", "message": '/call deploy.deploy_service {"service":"orders"}'},
    {"label": "Migrate a database", "message": '/call deploy.migrate {"database": "orders-db"}'},
    {"label": "Roll back a release", "message": '/call release.rollback {"service":"orders"}'},
    {"label": "Connect my tracker", "message": "/call tracker.list_issues {}"},
    {
        "label": "Book a trip through the planner",
        "message": "/call planner.delegate "
        + json.dumps({"message": '/call travel.send_message {"message": "Lisbon on Friday"}'}),
    },
    {"label": "What can you do?", "message": "What can you do?"},
]
"""What the widget offers to send with one click while the demo is on: a call of each kind of question it asks."""

DEMO_APPROVAL = {"tools": ["release.rollback"], "approvers": {"groups": ["ops"]}, "self_approval": True}
"""The demo's approval policy: a rollback needs the approval of the group `ops`, whose one member is the dev user,
who may approve their own calls (so one person can try it)."""


def demo_a2a_entries(travel_url: str) -> list[dict[str, Any]]:
    """The hub's `a2a_agents` entries for the demo A2A agent at this URL."""
    return [{"id": "travel", "url": travel_url}]


def service_ports(first: int) -> tuple[int, int, int, int]:
    """The ports of the tracker, deploy, release and travel when they run as a service from port `first` on."""
    return first, first + 1, first + 2, first + 3


def demo_urls(host: str, ports: tuple[int, int, int]) -> tuple[str, str, str]:
    """The MCP endpoint URLs the demo servers will have on these ports."""
    tracker, deploy, release = (base_url(host, port) for port in ports)
    return f"{tracker}/mcp", f"{deploy}/mcp", f"{release}/mcp"


class _Server(uvicorn.Server):
    # The process owner (the hub's own server, or the test) handles signals; demo servers stop when told.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def start_demo(
    host: str = "127.0.0.1",
    *,
    tracker_port: int = 0,
    deploy_port: int = 0,
    release_port: int = 0,
    travel_port: int = 0,
    token_ttl: float = 3600.0,
    public_host: str | None = None,
    bound: list[socket.socket] | None = None,
) -> AsyncIterator[Demo]:
    """Serve the demo servers until the block exits; a port of 0 picks a free one. `public_host` is the name others
    reach them by (the tracker's OAuth issuer and the travel agent's card say it), when that is not `host`: a
    service name when they listen on 0.0.0.0 in a container. `bound`: the four sockets (tracker, deploy, release,
    travel) already bound (`bind`), instead of the ports; closed with the servers."""
    # The servers' SDKs (MCP server, A2A server) are slow to import: a hub whose demo is off never does.
    from elicithub.demo.deploy import deploy_server, release_server
    from elicithub.demo.tracker import Tracker
    from elicithub.demo.travel import travel_app

    sockets: list[socket.socket] = list(bound or [])
    try:
        for port in (tracker_port, deploy_port, release_port, travel_port)[len(sockets) :]:
            sockets.append(bind(host, port))
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    bases = [base_url(public_host or host, sock.getsockname()[1]) for sock in sockets]
    # An OAuth issuer must be https or loopback (RFC 8414; the SDK enforces it): a tracker reached by a service name
    # stays on localhost, where its sign-in works only for a browser and a hub that both reach it there.
    named = public_host is not None and public_host not in _LOOPBACK
    tracker_base = base_url("localhost", sockets[0].getsockname()[1]) if named else bases[0]
    tracker = Tracker(tracker_base, token_ttl=token_ttl)
    apps: list[ASGIApp] = [
        tracker.app,
        deploy_server().streamable_http_app(host=host),
        release_server().streamable_http_app(host=host),
        travel_app(bases[3]),
    ]
    # log_config/log_level None: the hub owns the process's logging; a server of its own must not reset the
    # shared uvicorn loggers (that silenced the hub's startup lines and access log).
    servers = [
        _Server(uvicorn.Config(app, log_config=None, log_level=None, lifespan="on", timeout_graceful_shutdown=1))
        for app in apps
    ]
    tasks = [
        asyncio.create_task(_serve(server, sock), name=f"demo-{name}")
        for server, sock, name in zip(servers, sockets, ("tracker", "deploy", "release", "travel"), strict=True)
    ]
    try:
        await _until_started(servers, tasks)
        yield Demo(
            tracker_url=tracker.url,
            deploy_url=f"{bases[1]}/mcp",
            release_url=f"{bases[2]}/mcp",
            tracker_issuer=tracker.base_url,
            tracker=tracker,
            travel_url=bases[3],
        )
    finally:
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
        for sock in sockets:
            sock.close()


async def _serve(server: _Server, sock: socket.socket) -> None:
    try:
        await server.serve(sockets=[sock])
    except SystemExit as exc:
        # uvicorn exits the process when an app fails to start; here that must not take the hub down with it.
        raise RuntimeError(f"the app failed to start (exit code {exc.code})") from None


async def _until_started(servers: list[_Server], tasks: list[asyncio.Task[None]]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _STARTUP_TIMEOUT_S
    while not all(server.started for server in servers):
        failed = next((t for t in tasks if t.done()), None)
        if failed is not None:
            raise RuntimeError(f"{failed.get_name()} stopped while starting") from _error(failed)
        if loop.time() > deadline:
            raise RuntimeError(f"demo servers did not start within {_STARTUP_TIMEOUT_S:g} s")
        await asyncio.sleep(0.01)


def _error(task: asyncio.Task[None]) -> BaseException | None:
    return None if task.cancelled() else task.exception()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket's address taken (0: a free port), to serve on later: a port picked and only bound later
    can be taken by another process meanwhile."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
