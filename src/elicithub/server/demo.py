"""The built-in demo as a hub runs it: its servers, agents, approval policy and admin added to the config, the servers'
ports bound when the hub is built and served when it starts."""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Any

from elicithub.config import A2aAgentConfig, AgentConfig, Config, McpServerConfig
from elicithub.config.approvals import ApprovalPolicy
from elicithub.demo.addresses import base_url
from elicithub.demo.launcher import (
    DEMO_APPROVAL,
    bind,
    demo_a2a_entries,
    demo_agents,
    demo_entries,
    demo_urls,
    service_ports,
    start_demo,
)

log = logging.getLogger(__name__)

DEMO_HOST = "127.0.0.1"
"""The demo servers listen on loopback only, whatever address the hub itself listens on."""


class HubDemo:
    """The demo servers this hub runs itself (none when `demo.servers_host` names where they run)."""

    def __init__(self) -> None:
        self._ports: tuple[int, int, int, int] | None = None
        self._sockets: list[socket.socket] = []
        self._running: contextlib.AsyncExitStack | None = None

    def configure(self, config: Config) -> Config:
        """The config with the demo's servers, its A2A agent, (unless agents are configured) its agents, whose
        assistant has the configured servers' tools too, and its dev user among the admins. The servers' ports are
        chosen now so the bridge knows their URLs; a configured id takes precedence over a demo one. With
        `demo.servers_host` the servers run elsewhere."""
        host = config.demo.servers_host
        if host is None:
            host = DEMO_HOST
            # Bound now, served at start: the ports go into the config, and nobody else can take them meanwhile.
            self._sockets = [bind(DEMO_HOST, 0) for _ in range(4)]
            self._ports = ports = tuple(sock.getsockname()[1] for sock in self._sockets)
        else:
            ports = service_ports(config.demo.servers_port)
        entries = demo_entries(*demo_urls(host, ports[:3]))
        taken = {s.id for s in config.mcp_servers} | {a.id for a in config.a2a_agents}
        servers = [*[McpServerConfig.model_validate(e) for e in entries if e["id"] not in taken], *config.mcp_servers]
        travel = demo_a2a_entries(base_url(host, ports[3]))
        a2a = [*[A2aAgentConfig.model_validate(e) for e in travel if e["id"] not in taken], *config.a2a_agents]
        update: dict[str, Any] = {"mcp_servers": servers, "a2a_agents": a2a}
        dev = config.demo.dev_user
        # Whoever tries the demo (a browser the demo signs in as its dev user) sees the admin's page too.
        update["admins"] = config.admins if dev in config.admins else [*config.admins, dev]
        agents = demo_agents([s.id for s in config.mcp_servers] + [a.id for a in config.a2a_agents])
        if config.agents == Config().agents and not taken & {"travel", *(a["id"] for a in agents)}:
            update["agents"] = [AgentConfig.model_validate(a) for a in agents]
        if not config.approvals and "release" not in taken and "ops" not in config.groups:
            update["approvals"] = [ApprovalPolicy.model_validate(DEMO_APPROVAL)]
            update["groups"] = {**config.groups, "ops": [dev]}
        return config.model_copy(update=update)

    async def start(self) -> None:
        """Serve the demo servers on the ports bound for them (nothing when they run elsewhere)."""
        if self._ports is None:
            return
        self._running = contextlib.AsyncExitStack()
        tracker, deploy, release, travel = self._ports
        await self._running.enter_async_context(
            start_demo(
                DEMO_HOST,
                tracker_port=tracker,
                deploy_port=deploy,
                release_port=release,
                travel_port=travel,
                bound=self._sockets,
            )
        )
        log.info("demo servers: tracker, deploy and release on %s", DEMO_HOST)

    async def close(self) -> None:
        if self._running is not None:
            await self._running.aclose()
        for sock in self._sockets:  # a hub never started still holds them
            sock.close()
