"""The tool router: every trigger registered under its prefix, behind the run loop's `Tools` protocol.

A trigger is anything that runs tools for an agent and may ask a person on the way (a downstream MCP server, an
A2A agent, a delegated agent). Adding one is registering it here; the run loop never changes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Protocol

from elicithub.core.jsoncodec import JsonObject
from elicithub.runtime.models import ToolSpec
from elicithub.runtime.tools import CallContext, ToolOutcome

log = logging.getLogger(__name__)


class Trigger(Protocol):
    """Tools under one prefix (`PREFIX.tool`); `list_tools` and `call` take the tool names without it."""

    @property
    def prefix(self) -> str: ...

    async def list_tools(self, context: CallContext | None) -> list[ToolSpec]: ...

    async def call(self, tool: str, arguments: JsonObject, context: CallContext) -> ToolOutcome: ...

    async def close(self) -> None: ...


class ToolRouter:
    """`agents` says which prefixes each agent may use (None: every trigger but the agents themselves); a call's
    agent is the last of its context's `agent_path`. Without `agents`, every trigger is everyone's."""

    def __init__(
        self, triggers: list[Trigger] | None = None, agents: dict[str, list[str] | None] | None = None
    ) -> None:
        self._triggers: dict[str, Trigger] = {}
        self._agents = agents or {}
        self._qualified: dict[str, tuple[list[ToolSpec], list[ToolSpec]]] = {}
        for trigger in triggers or []:
            self.register(trigger)

    def _allowed(self, context: CallContext | None) -> set[str]:
        agent = context.agent_path[-1] if context is not None and context.agent_path else None
        named = self._agents.get(agent) if agent is not None else None
        if named is not None:
            return set(named)
        return {p for p in self._triggers if p not in self._agents}

    def register(self, trigger: Trigger) -> None:
        if trigger.prefix in self._triggers:
            raise ValueError(f"two triggers under the prefix {trigger.prefix!r}")
        self._triggers[trigger.prefix] = trigger

    async def list_tools(self, context: CallContext | None = None) -> list[ToolSpec]:
        """Every trigger's tools, qualified by its prefix; a trigger that cannot list them now is left out."""
        allowed = self._allowed(context)
        triggers = [t for p, t in self._triggers.items() if p in allowed]
        listed: list[list[ToolSpec] | BaseException]
        if len(triggers) == 1:  # nothing to list beside it: no task to run it in (a cached listing is the rule)
            listed = [await _listing(triggers[0], context)]
        else:
            listed = await asyncio.gather(*(t.list_tools(context) for t in triggers), return_exceptions=True)
        specs: list[ToolSpec] = []
        for trigger, result in zip(triggers, listed, strict=True):
            if isinstance(result, BaseException):
                log.warning("%s is unavailable: %s", trigger.prefix, result)
                continue
            specs.extend(self._qualify(trigger.prefix, result))
        return specs

    def _qualify(self, prefix: str, tools: list[ToolSpec]) -> list[ToolSpec]:
        """The tools named under their prefix. A trigger hands out its cached listing as one list while it holds,
        so every run (and every waiting one keeps its own tool list) shares one set of qualified specs."""
        known = self._qualified.get(prefix)
        if known is None or known[0] is not tools:
            known = self._qualified[prefix] = (tools, [replace(t, name=f"{prefix}.{t.name}") for t in tools])
        return known[1]

    async def call(self, name: str, arguments: JsonObject, context: CallContext) -> ToolOutcome:
        prefix, _, tool = name.partition(".")
        trigger = self._triggers.get(prefix) if prefix in self._allowed(context) else None
        if trigger is None or not tool:
            return ToolOutcome(f"There is no tool {name}.", is_error=True)
        return await trigger.call(tool, arguments, context)

    async def close(self) -> None:
        for trigger in self._triggers.values():
            await trigger.close()


async def _listing(trigger: Trigger, context: CallContext | None) -> list[ToolSpec] | BaseException:
    """`trigger`'s tools, or what it failed with (as `asyncio.gather(return_exceptions=True)` would have it)."""
    try:
        return await trigger.list_tools(context)
    except Exception as exc:
        return exc
