"""The one seam every model sits behind: what the run loop offers a model (tools) and what a turn gives back."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Protocol

from elicithub.core import jsoncodec
from elicithub.core.events import TokenUsage
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Message, ToolCall
from elicithub.errors import HubError


@dataclass(frozen=True)
class ToolSpec:
    name: str
    """Qualified as SERVER.TOOL; a tool the run's client makes (`RunRecord.client_tools`) has its own name, without
    a dot."""
    description: str
    input_schema: JsonObject
    stands_in: bool = False
    """`SERVER.connect` of a server whose tools only the person's sign-in shows: any `SERVER.*` may be called."""
    title: str | None = None
    output_schema: JsonObject | None = None
    annotations: JsonObject | None = None
    """These three as the downstream server gave them (the models are not shown them; the hub's `/mcp` is)."""


@dataclass(frozen=True)
class ModelTurn:
    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str = ""
    """What the model thought before it answered (shown as it came; not sent back to it)."""
    reasoning_signature: str | None = None
    """The provider's seal over that thinking, which it needs back unchanged in the next request (Anthropic)."""
    usage: TokenUsage | None = None
    """The tokens the request read and wrote, as the provider counted them (None: the model does not say)."""


@dataclass(frozen=True)
class ModelRequest:
    """One request of a run's turn: the agent's instructions, the conversation as it fits the window, the tools."""

    messages: list[Message]
    tools: list[ToolSpec]
    instructions: str | None = None
    agent: str = "assistant"
    """Whose request it is (the `agent` label of the usage metrics)."""


class Sink(Protocol):
    """Where a turn's pieces go as the model streams them (runtime/live.py's Turn)."""

    def add_text(self, delta: str) -> None: ...

    def add_reasoning(self, delta: str) -> None: ...

    def add_tool_input(self, call_id: str, name: str, delta: str) -> None: ...


class Status(Protocol):
    """Says what the request does now, on the run's stream (a retry and its wait)."""

    async def __call__(self, text: str) -> None: ...


class Model(Protocol):
    """The one seam: a turn streams its pieces into `sink` and returns what the model said in all. Cancelling it
    closes the provider's stream."""

    name: str

    @property
    def context_tokens(self) -> int | None:
        """The model's window, which each request fits (runtime/models/context.py); None: no limit."""

    @property
    def max_tokens(self) -> int:
        """The most tokens one answer may have: kept free in the window."""

    async def turn(self, request: ModelRequest, sink: Sink, status: Status) -> ModelTurn: ...


class Completing(ABC):
    """A model that answers a turn whole (the scripted one, and tests' models): its text is one piece."""

    name = "completing"
    context_tokens: int | None = None
    max_tokens = 0

    @abstractmethod
    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> ModelTurn:
        """The whole answer to `messages`, with `tools` offered."""

    async def turn(self, request: ModelRequest, sink: Sink, status: Status) -> ModelTurn:
        turn = await self.complete(request.messages, request.tools)
        sink.add_text(turn.text or "")
        return turn


class Unreadable(HubError):
    """A tool call's arguments, as a model wrote them, are not a JSON object the hub can use; the message says why,
    in words the model (or the person typing to the scripted one) can act on."""


def read_arguments(name: str, text: str) -> JsonObject:
    """The arguments of a call to tool `name` from the JSON text a model wrote; raises Unreadable."""
    try:
        arguments = jsoncodec.loads(text)
    except jsoncodec.BadNumber as exc:
        raise Unreadable(f"The arguments for {name} hold a non-finite number ({exc}); use a finite number.") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise Unreadable(f"The arguments for {name} are not valid JSON ({exc.msg} at {where}).") from None
    if not isinstance(arguments, dict):
        raise Unreadable(f"The arguments for {name} must be a JSON object.")
    return arguments


def callable_name(name: str, tools: list[ToolSpec]) -> bool:
    """A listed tool, or any tool of a server that stands in with `SERVER.connect` (the call asks the sign-in)."""
    prefix = name.partition(".")[0]
    return any(t.name == name or (t.stands_in and t.name == f"{prefix}.connect") for t in tools)


class Unseen:
    """A sink nobody reads: a turn asked for its whole answer alone (an MCP server's sampling request)."""

    def add_text(self, delta: str) -> None:
        pass

    def add_reasoning(self, delta: str) -> None:
        pass

    def add_tool_input(self, call_id: str, name: str, delta: str) -> None:
        pass


async def unshown(text: str) -> None:
    """A status nobody reads."""
