"""What the run loop needs from whatever runs tools: the call context and the outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from elicithub.runtime.models import ToolSpec


@dataclass(frozen=True)
class CallContext:
    """Who a tool call runs for, and where its questions can be shown."""

    conversation_id: str
    stream_id: str
    user_id: str | None
    supports_elicitation: bool

    @property
    def can_ask(self) -> bool:
        # Elicitation needs an interactive, identified user: only they may answer.
        return self.supports_elicitation and self.user_id is not None


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool = False


class Tools(Protocol):
    async def list_tools(self, context: CallContext | None = None) -> list[ToolSpec]: ...

    async def call(self, name: str, arguments: dict[str, Any], context: CallContext) -> ToolOutcome: ...
