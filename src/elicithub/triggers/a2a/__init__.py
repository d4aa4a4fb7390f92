"""Downstream A2A agents as triggers: one per configured agent, over one pooled `httpx` client (the a2a-sdk's)."""

from __future__ import annotations

import httpx

from elicithub import telemetry
from elicithub.config import A2aAgentConfig
from elicithub.triggers.a2a.agent import A2aAgentTrigger, A2aShared
from elicithub.triggers.http import MAX_CONNECTIONS


def a2a_triggers(agents: list[A2aAgentConfig], shared: A2aShared) -> list[A2aAgentTrigger]:
    """One trigger per configured agent."""
    return [A2aAgentTrigger(agent, shared) for agent in agents]


def a2a_client() -> httpx.AsyncClient:
    """The hub's pooled client for A2A agents; each request's deadline is the agent's `timeout_s`."""
    return httpx.AsyncClient(
        limits=httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=100),
        event_hooks=telemetry.http_hooks(),
    )


__all__ = ["A2aAgentTrigger", "A2aShared", "a2a_client", "a2a_triggers"]
