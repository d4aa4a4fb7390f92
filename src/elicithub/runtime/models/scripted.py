"""The scripted model, the embedded default: deterministic, no provider (docs/concepts.md)."""

from __future__ import annotations

import re

from elicithub.core.runs import Message, ToolCall
from elicithub.runtime.models.seam import Completing, ModelTurn, ToolSpec, Unreadable, callable_name, read_arguments

_CALL = re.compile(r"^/call\s+(?P<name>[A-Za-z][\w-]*\.[\w.-]+)\s*(?P<args>.*)$", re.DOTALL)


class ScriptedModel(Completing):
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
            arguments = read_arguments(name, raw)
        except Unreadable as exc:
            return ModelTurn(text=str(exc))
        self._calls += 1
        return ModelTurn(tool_calls=[ToolCall(f"call_{self._calls}", name, arguments)])


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
