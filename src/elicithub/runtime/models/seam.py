"""The one seam every model sits behind: what the run loop offers a model (tools) and what a turn gives back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

from elicithub.core import jsoncodec
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Message, ToolCall
from elicithub.errors import HubError


@dataclass(frozen=True)
class ToolSpec:
    name: str
    """Qualified as SERVER.TOOL."""
    description: str
    input_schema: JsonObject
    stands_in: bool = False
    """`SERVER.connect` of a server whose tools only the person's sign-in shows: any `SERVER.*` may be called."""


@dataclass(frozen=True)
class ModelTurn:
    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


class Model(Protocol):
    name: str

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> ModelTurn: ...


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
