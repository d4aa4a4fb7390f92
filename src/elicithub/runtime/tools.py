"""What the run loop needs from whatever runs tools: the call context, the outcome, and the Tools protocol."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import RunRecord
from elicithub.runtime.models import ToolSpec

if TYPE_CHECKING:
    from elicithub.runtime.asker import Asker


Progress = Callable[[str], Awaitable[None]]
"""Shows what a call is doing now on its run's stream."""


@dataclass(frozen=True)
class CallContext:
    """Who a tool call runs for, where its questions are shown, and how it asks them.

    `run_id` is the run whose stream shows the questions (the one the person follows); `caller_run_id` the run
    making the call, when that is another (a delegated run).
    """

    conversation_id: str
    run_id: str
    user_id: str | None
    supports_elicitation: bool
    asker: Asker | None = None
    agent_path: tuple[str, ...] = ()
    caller_run_id: str | None = None
    surface: str = "chat"
    """Where the person is (chat, mcp, a2a, slack): what a tool that cannot ask them tells them depends on it."""
    modes: frozenset[str] = frozenset({"form", "url"})
    """The kinds of question their client can show (an MCP client declares them)."""
    progress: Progress | None = None
    """Where a call that works on says what it is doing (a downstream task's status message); None when listing."""
    call_id: str | None = None
    """The model's id of this call in `calling_run`: with it, it names the call across a rerun (None when listing)."""
    run_child: RunChild | None = None
    """How the runner runs a run delegated to inside this call (None when listing): the runner hands it to each call,
    so a delegation trigger needs no runner of its own."""

    @property
    def calling_run(self) -> str:
        """The run making this call: a delegation's child run belongs to it."""
        return self.caller_run_id or self.run_id

    @property
    def can_ask(self) -> bool:
        # Elicitation needs an interactive, identified user: only they may answer.
        return self.supports_elicitation and self.user_id is not None and self.asker is not None

    def can_show(self, mode: str) -> bool:
        """Whether a question of this mode (form, url) can be asked of the person."""
        return self.can_ask and mode in self.modes


def cannot_ask(context: CallContext, needs: str, mode: str) -> str:
    """A tool's error when it needs its person (`needs`, a clause) but cannot ask them, in the words of the
    surface they use: what to change so that it can."""
    if context.surface == "mcp" and context.user_id is not None:
        return (
            f"{needs}, but this MCP client did not declare the elicitation capability ({mode} mode), so the hub "
            "cannot ask."
        )
    if context.surface == "a2a" and context.user_id is not None:
        return f"{needs}; give it as a message on this task when the task asks for input."
    return (
        f"{needs}, but this chat client cannot show questions. Ask again from a signed-in client that sends "
        "x-supports-elicitation: true."
    )


def stopped_call(name: str) -> str:
    """A tool's error when its run was stopped while it waited (its task cancelled, a new message came)."""
    return f"The run was stopped; the call to {name} was cancelled."


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool = False
    result: JsonObject | None = field(default=None, compare=False)
    """A downstream MCP server's `CallToolResult` as it gave it (content, structuredContent, isError): what a direct
    call through the gateway returns (None: the call never reached a server, or made no such result). Not compared:
    two outcomes that tell the run the same are equal."""


RunChild = Callable[[RunRecord, CallContext, bool], Awaitable[ToolOutcome]]
"""The runner's run of a delegated (child) run inside its parent's call: the child, the parent's call, resumed."""


class Tools(Protocol):
    async def list_tools(self, context: CallContext | None = None) -> list[ToolSpec]: ...

    async def call(self, name: str, arguments: JsonObject, context: CallContext) -> ToolOutcome: ...
