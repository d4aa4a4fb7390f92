"""A trigger built on its first use: the SDK it stands on is imported then, not by every hub's start."""

from __future__ import annotations

from collections.abc import Callable

from elicithub.core.jsoncodec import JsonObject
from elicithub.runtime.models import ToolSpec
from elicithub.runtime.router import Trigger
from elicithub.runtime.tools import CallContext, ToolOutcome


class Deferred:
    """The trigger `build` makes, under `prefix`, made when its tools are first listed or called (that first use
    pays for the import). Closing one never built closes nothing."""

    def __init__(self, prefix: str, build: Callable[[], Trigger]) -> None:
        self._prefix = prefix
        self._build = build
        self._built: Trigger | None = None

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def trigger(self) -> Trigger:
        if self._built is None:
            self._built = self._build()
        return self._built

    async def list_tools(self, context: CallContext | None) -> list[ToolSpec]:
        return await self.trigger.list_tools(context)

    async def call(self, tool: str, arguments: JsonObject, context: CallContext) -> ToolOutcome:
        return await self.trigger.call(tool, arguments, context)

    async def close(self) -> None:
        if self._built is not None:
            await self._built.close()
