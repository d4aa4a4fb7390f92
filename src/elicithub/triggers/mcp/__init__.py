"""Downstream MCP servers as triggers: one per configured server, over one pooled HTTP client. A server's trigger
is built on its first use (a listing or a call): a hub imports the MCP SDK then, not when it starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import httpx2

from elicithub.config import McpServerConfig
from elicithub.core.broker import Broker
from elicithub.core.ports import KeyValueStore
from elicithub.runtime.models import Model
from elicithub.runtime.router import Trigger
from elicithub.triggers.deferred import Deferred
from elicithub.triggers.http import pooled_client
from elicithub.triggers.mcp.transport import OneRequestFails

if TYPE_CHECKING:
    from elicithub.triggers.credentials import CredentialGate
    from elicithub.triggers.mcp.tasks import Sleep


@dataclass(frozen=True)
class McpShared:
    """What every MCP server trigger of a hub shares: the broker, one pooled HTTP client (injectable, e.g. to
    record traffic), the question deadline, the round cap, the model that answers sampling, the credential gate."""

    broker: Broker
    http: httpx2.AsyncClient
    timeout_s: float
    max_rounds: int
    sampler: Model | None = None
    gate: CredentialGate | None = None
    listings: KeyValueStore | None = None  # where user-scoped servers' tool listings are kept for everyone
    task_sleep: Sleep = anyio.sleep  # the wait between two polls of a downstream task (tests step it)


def mcp_triggers(servers: list[McpServerConfig], shared: McpShared) -> list[Deferred]:
    """One trigger per configured server, each built on its first use."""

    def trigger(server: McpServerConfig) -> Deferred:
        def build() -> Trigger:
            from elicithub.triggers.mcp.server import McpServerTrigger

            return McpServerTrigger(server, shared)

        return Deferred(server.id, build)

    return [trigger(server) for server in servers]


def downstream_client(timeout_s: float) -> httpx2.AsyncClient:
    """The hub's pooled client for MCP servers; its read timeout outlasts a question of `timeout_s`, and a broken
    connection fails only the request it carried (`transport.OneRequestFails`)."""
    return pooled_client(read_timeout_s=max(300, timeout_s + 60), wrap=OneRequestFails)


__all__ = ["McpShared", "downstream_client", "mcp_triggers"]
