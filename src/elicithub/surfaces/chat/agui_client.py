"""What a `RunAgentInput`'s client offers a run (its front-end tools, its context) and gives back (the results of
the calls it made), in the hub's terms (DESIGN.md v5, "Front-end tools (AG-UI)")."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ag_ui.core import Context, Tool, ToolMessage
from ag_ui.core import Message as AguiMessage

from elicithub.core.runs import ClientTool, Message
from elicithub.runtime.conversations import Offered
from elicithub.surfaces.chat.agui_events import words

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A front-end tool's name, as every provider takes one. Without `__`: the hub's own tools are `SERVER.TOOL`, sent
to the model as `SERVER__TOOL`, so a front-end tool's name can never be one of theirs."""
NO_ARGUMENTS = {"type": "object", "properties": {}}


def offered(tools: Sequence[Tool] | None, context: Sequence[Context] | None) -> Offered:
    """The tools and the context of an input; raises ValueError naming each tool that cannot be offered."""
    problems = []
    names: set[str] = set()
    for index, tool in enumerate(tools or ()):
        if not NAME.fullmatch(tool.name) or "__" in tool.name:
            problems.append(f"tools[{index}].name: {tool.name!r} is not 1-64 of A-Z a-z 0-9 _ - without '__'")
        elif tool.name in names:
            problems.append(f"tools[{index}].name: {tool.name!r} is offered twice")
        if tool.parameters is not None and not isinstance(tool.parameters, dict):
            problems.append(f"tools[{index}].parameters: a JSON schema object is required")
        names.add(tool.name)
    if problems:
        raise ValueError("; ".join(problems))
    given = [
        ClientTool(name=t.name, description=t.description, parameters=t.parameters or NO_ARGUMENTS) for t in tools or ()
    ]
    instructions = "\n\n".join(f"{c.description}:\n{c.value}" for c in context or ())
    return Offered(given, instructions)


def results(messages: Sequence[AguiMessage]) -> list[Message]:
    """The tool messages that end `messages` (the results of the calls the client made), as the hub keeps them.
    A result with `error` is a failed call's."""
    told: list[Message] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        text = words(message.content) or message.error or ""
        told.append(
            {"role": "tool", "tool_call_id": message.tool_call_id, "content": text, "is_error": bool(message.error)}
        )
    return told[::-1]
