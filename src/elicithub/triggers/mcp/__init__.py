"""Downstream MCP servers as triggers: one per configured server, over one pooled HTTP client."""

from __future__ import annotations

import httpx2

from elicithub.config import McpServerConfig
from elicithub.core.broker import Broker
from elicithub.runtime.models import Model
from elicithub.triggers.credentials import CredentialGate
from elicithub.triggers.http import pooled_client
from elicithub.triggers.mcp.questions import Question, Refused
from elicithub.triggers.mcp.rounds import RoundsExceeded, drive_rounds, is_input_required
from elicithub.triggers.mcp.server import McpServerTrigger


def mcp_triggers(
    servers: list[McpServerConfig],
    broker: Broker,
    http: httpx2.AsyncClient,
    *,
    timeout_s: float,
    max_rounds: int,
    sampler: Model | None,
    gate: CredentialGate | None = None,
) -> list[McpServerTrigger]:
    """One trigger per server, all on `http` (see `downstream_client`; inject another, e.g. to record traffic)."""
    return [
        McpServerTrigger(server, broker, http, timeout_s=timeout_s, max_rounds=max_rounds, sampler=sampler, gate=gate)
        for server in servers
    ]


def downstream_client(timeout_s: float) -> httpx2.AsyncClient:
    """The hub's pooled client for MCP servers; its read timeout outlasts a question of `timeout_s`."""
    return pooled_client(read_timeout_s=max(300, timeout_s + 60))


__all__ = [
    "McpServerTrigger",
    "Question",
    "Refused",
    "RoundsExceeded",
    "downstream_client",
    "drive_rounds",
    "is_input_required",
    "mcp_triggers",
]
