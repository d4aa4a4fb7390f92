"""The protocol surfaces every hub serves (MCP, A2A, AG-UI), each built by its first request (surfaces/deferred.py):
their SDKs (the MCP SDK, a2a-sdk with protobuf, ag_ui) are imported then, not by the hub's start."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from elicithub.surfaces import a2a, chat, mcp
from elicithub.surfaces.deferred import Deferred

if TYPE_CHECKING:
    from elicithub.server.hub import Hub
    from elicithub.surfaces.a2a.agent import A2aSurface
    from elicithub.surfaces.chat.agui import AguiSurface
    from elicithub.surfaces.mcp.server import McpSurface

AGENT_DESCRIPTION = "Ask the hub's {agent}; it calls tools, and asks you when a tool needs your input."
"""How the hub's MCP and A2A servers describe an agent whose config gives no description."""


def _agents(hub: Hub) -> dict[str, str]:
    return {a.id: a.description or AGENT_DESCRIPTION.format(agent=a.id) for a in hub.config.agents}


def mcp_surface(hub: Hub) -> Deferred[McpSurface]:
    """`/mcp`: the hub's agents, and the downstream tools, to MCP clients."""

    def build() -> McpSurface:
        from elicithub.surfaces.mcp.server import McpSurface
        from elicithub.surfaces.mcp.state import Tickets
        from elicithub.surfaces.mcp.task_records import TaskRecords

        config = hub.config
        return McpSurface(
            hub.conversations,
            Tickets(hub.backend.kv),
            TaskRecords(hub.backend.kv, config.conversations.retention_s),
            hub.identity,
            hub.keys.derive("mcp-request-state"),
            config.elicitation.timeout_s,
            _agents(hub),
            hub.tool_changes,
            hub.tools if config.mcp_server.tools else None,
            connectable={s.id for s in config.mcp_servers if s.credential_scope == "user"},
            host=urlsplit(config.public_url).hostname or "127.0.0.1",
        )

    return Deferred(build, {mcp.PATH: ("GET", "POST", "DELETE")})


def a2a_surface(hub: Hub) -> Deferred[A2aSurface]:
    """`/a2a` and the agent card: the hub's agents to A2A clients."""

    def build() -> A2aSurface:
        from elicithub.surfaces.a2a.agent import A2aSurface
        from elicithub.surfaces.a2a.tasks import HubTaskStore

        config, oidc = hub.config, hub.config.auth.oidc
        return A2aSurface(
            hub.conversations,
            HubTaskStore(hub.backend.kv, config.conversations.retention_s),
            hub.identity,
            config.public_url,
            _agents(hub),
            issuer=oidc.issuer if oidc is not None else None,
        )

    return Deferred(build, {a2a.PATH: ("POST",), a2a.CARD_PATH: ("GET",)})


def agui_surface(hub: Hub) -> Deferred[AguiSurface]:
    """`/run/agui`: the hub's agents as AG-UI agents."""

    def build() -> AguiSurface:
        from elicithub.surfaces.chat.agui import AguiSurface

        config = hub.config
        return AguiSurface(
            hub.conversations,
            hub.backend.kv,
            hub.identity,
            hub.streams,
            keepalive_s=config.streams.keepalive_s,
            retention_s=config.conversations.retention_s,
            agent_of=lambda name: config.agent(name).id,
        )

    return Deferred(build, dict.fromkeys(chat.AGUI_PATHS, ("POST",)))
