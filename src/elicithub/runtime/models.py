"""Model adapters: the deterministic scripted model and an OpenAI-compatible one."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from elicithub.config import ModelConfig
from elicithub.core import jsoncodec
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Message, ToolCall

if TYPE_CHECKING:  # openai takes seconds to import: only an OpenAI model imports it, when it is made
    from openai.types.chat import ChatCompletionFunctionToolParam
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


_CALL = re.compile(r"^/call\s+(?P<name>[A-Za-z][\w-]*\.[\w.-]+)\s*(?P<args>.*)$", re.DOTALL)


class ScriptedModel:
    """The scripted model (docs/concepts.md): `/call SERVER.TOOL {json}` calls a tool; tool results are echoed
    back."""

    name = "scripted"

    def __init__(self) -> None:
        self._calls = 0

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> ModelTurn:
        last = messages[-1] if messages else {"role": "user", "content": ""}
        if last["role"] == "tool":
            text = str(last.get("content") or "")
            return ModelTurn(text=f"Tool error: {text}" if last.get("is_error") else text)
        match = _CALL.match(str(last.get("content") or "").strip())
        if match is None:
            return ModelTurn(text=_help(tools))
        name, raw = match["name"], match["args"].strip() or "{}"
        if not callable_name(name, tools):
            return ModelTurn(text=f"There is no tool {name}. {_help(tools)}")
        try:
            arguments = _read_arguments(name, raw)
        except _Unreadable as exc:
            return ModelTurn(text=str(exc))
        self._calls += 1
        return ModelTurn(tool_calls=[ToolCall(f"call_{self._calls}", name, arguments)])


class _Unreadable(HubError):
    """A tool call's arguments, as a model wrote them, are not a JSON object the hub can use; the message says why,
    in words the model (or the person typing to the scripted one) can act on."""


def _read_arguments(name: str, text: str) -> JsonObject:
    """The arguments of a call to tool `name` from the JSON text a model wrote; raises _Unreadable."""
    try:
        arguments = jsoncodec.loads(text)
    except jsoncodec.BadNumber as exc:
        raise _Unreadable(f"The arguments for {name} hold a non-finite number ({exc}); use a finite number.") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise _Unreadable(f"The arguments for {name} are not valid JSON ({exc.msg} at {where}).") from None
    if not isinstance(arguments, dict):
        raise _Unreadable(f"The arguments for {name} must be a JSON object.")
    return arguments


def callable_name(name: str, tools: list[ToolSpec]) -> bool:
    """A listed tool, or any tool of a server that stands in with `SERVER.connect` (the call asks the sign-in)."""
    prefix = name.partition(".")[0]
    return any(t.name == name or (t.stands_in and t.name == f"{prefix}.connect") for t in tools)


def _summary(description: str) -> str:
    """A tool description's first line: further lines (an A2A agent's skills, a docstring's details) are for the
    model, and in a listing would read as more tools."""
    return description.strip().split("\n", 1)[0]


def _help(tools: list[ToolSpec]) -> str:
    listing = "\n".join(f"- {t.name}: {_summary(t.description)}" for t in tools) or "- (no tools are configured)"
    help_ = f"Call a tool with: /call SERVER.TOOL {{json arguments}}\nAvailable tools:\n{listing}"
    unknown = [t.name.partition(".")[0] for t in tools if t.stands_in]
    if unknown:
        names = ", ".join(unknown)
        help_ += f"\nConnect your account to see the tools of: {names} (call SERVER.connect, or any of its tools)."
    return help_


class OpenAIModel:
    """Any OpenAI-compatible chat completions endpoint, with tool calling."""

    def __init__(self, config: ModelConfig) -> None:
        from openai import AsyncOpenAI

        key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        self.name = config.model or "gpt-4o-mini"
        self._client = AsyncOpenAI(base_url=config.base_url, api_key=key or "unused")

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> ModelTurn:
        wire_tools: list[ChatCompletionFunctionToolParam] = [
            {
                "type": "function",
                "function": {"name": _wire_name(t.name), "description": t.description, "parameters": t.input_schema},
            }
            for t in tools
        ]
        by_wire = {_wire_name(t.name): t.name for t in tools}
        wire_messages = [{k: v for k, v in m.items() if k != "is_error"} for m in messages]
        extra = {"tools": wire_tools} if wire_tools else {}
        create: Any = self._client.chat.completions.create
        response = await create(model=self.name, messages=wire_messages, **extra)
        message = response.choices[0].message
        calls = []
        for call in message.tool_calls or []:
            function = getattr(call, "function", None)
            if function is None:
                continue
            # A name not offered may be a tool of a server whose tools a sign-in shows (SERVER__TOOL).
            name = by_wire.get(function.name, function.name.replace("__", ".", 1))
            try:
                calls.append(ToolCall(call.id, name, _read_arguments(name, function.arguments or "{}")))
            except _Unreadable as exc:
                # Never made with arguments it was not given: the model is told why, as the call's error, and may
                # call again. Shown (and echoed back to the model) with none: not every OpenAI-compatible server
                # takes back arguments that are not JSON.
                calls.append(ToolCall(call.id, name, {}, error=f"{exc} The tool was not called; call it again."))
        return ModelTurn(text=message.content, tool_calls=calls)


def _wire_name(name: str) -> str:
    # OpenAI tool names allow [A-Za-z0-9_-] only.
    return name.replace(".", "__")


def create_model(config: ModelConfig) -> Model:
    return ScriptedModel() if config.kind == "scripted" else OpenAIModel(config)
