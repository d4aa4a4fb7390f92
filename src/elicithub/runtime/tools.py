"""What the run loop needs from whatever runs tools: the call context and the outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from elicithub.runtime.models import ToolSpec

if TYPE_CHECKING:
    from elicithub.core.broker import Resolution
    from elicithub.core.elicitation import Elicitation
    from elicithub.runtime.runs import Pause


class Checkpoint(Protocol):
    """How a tool call that waits for a person is made durable, and continued after a restart."""

    async def pause(self, pause: Pause) -> None:
        """Persist the run: it now waits for the elicitations named in `pause`."""

    async def replay(self, elicitation: Elicitation) -> Resolution | None:
        """An answer already given to this same question before the run was interrupted (waiting if still open)."""

    def resume_from(self) -> Pause | None:
        """Where the interrupted call stopped, the first time the call asks; None afterwards."""


@dataclass(frozen=True)
class CallContext:
    """Who a tool call runs for, and where its questions can be shown."""

    conversation_id: str
    stream_id: str
    user_id: str | None
    supports_elicitation: bool
    checkpoint: Checkpoint | None = None

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
