"""Downstream MCP servers as triggers: one per configured server, over one pooled HTTP client."""

from __future__ import annotations

import httpx2

from elicithub.config import McpServerConfig
from elicithub.protocol.mcp_rounds import EmptyRound, RoundsExceeded, drive_rounds, is_input_required
from elicithub.triggers.http import pooled_client
from elicithub.triggers.mcp.questions import Question
from elicithub.triggers.mcp.server import McpServerTrigger, McpShared
from elicithub.triggers.mcp.transport import OneRequestFails


def mcp_triggers(servers: list[McpServerConfig], shared: McpShared) -> list[McpServerTrigger]:
    """One trigger per configured server."""
    return [McpServerTrigger(server, shared) for server in servers]


def downstream_client(timeout_s: float) -> httpx2.AsyncClient:
    """The hub's pooled client for MCP servers; its read timeout outlasts a question of `timeout_s`, and a broken
    connection fails only the request it carried (`transport.OneRequestFails`)."""
    return pooled_client(read_timeout_s=max(300, timeout_s + 60), wrap=OneRequestFails)


__all__ = [
    "EmptyRound",
    "McpServerTrigger",
    "McpShared",
    "Question",
    "RoundsExceeded",
    "downstream_client",
    "drive_rounds",
    "is_input_required",
    "mcp_triggers",
]
