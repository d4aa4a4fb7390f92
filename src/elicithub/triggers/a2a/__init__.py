"""Downstream A2A agents as triggers: one per configured agent, over one pooled `httpx` client (the a2a-sdk's). An
agent's trigger is built on its first use: a hub imports the A2A client SDK then, not when it starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from elicithub import telemetry
from elicithub.config import A2aAgentConfig
from elicithub.core.broker import Broker
from elicithub.runtime.router import Trigger
from elicithub.triggers.deferred import Deferred
from elicithub.triggers.http import MAX_CONNECTIONS

if TYPE_CHECKING:
    import httpx

    from elicithub.triggers.credentials import CredentialGate


@dataclass(frozen=True)
class A2aShared:
    """What every A2A agent trigger of a hub shares: the broker, one pooled `httpx` client (the a2a-sdk's), the
    question deadline, the round cap and the credential gate."""

    broker: Broker
    http: httpx.AsyncClient
    timeout_s: float
    max_rounds: int
    gate: CredentialGate | None = None


def a2a_triggers(agents: list[A2aAgentConfig], shared: A2aShared) -> list[Deferred]:
    """One trigger per configured agent, each built on its first use."""

    def trigger(agent: A2aAgentConfig) -> Deferred:
        def build() -> Trigger:
            from elicithub.triggers.a2a.agent import A2aAgentTrigger

            return A2aAgentTrigger(agent, shared)

        return Deferred(agent.id, build)

    return [trigger(agent) for agent in agents]


def a2a_client() -> httpx.AsyncClient:
    """The hub's pooled client for A2A agents; each request's deadline is the agent's `timeout_s`. Only a hub with
    agents makes one: importing httpx imports its command line's libraries too (rich, pygments)."""
    import httpx

    return httpx.AsyncClient(
        limits=httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=100),
        event_hooks=telemetry.http_hooks(),
    )


__all__ = ["A2aShared", "a2a_client", "a2a_triggers"]
