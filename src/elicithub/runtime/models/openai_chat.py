"""The v1 OpenAI-compatible model (`model: {kind: openai}`), not streamed."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from elicithub.config import ModelConfig
from elicithub.core.runs import Message, ToolCall
from elicithub.runtime.models.seam import ModelTurn, ToolSpec, Unreadable, read_arguments

if TYPE_CHECKING:  # openai takes seconds to import: only an OpenAI model imports it, when it is made
    from openai.types.chat import ChatCompletionFunctionToolParam


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
                calls.append(ToolCall(call.id, name, read_arguments(name, function.arguments or "{}")))
            except Unreadable as exc:
                # Never made with arguments it was not given: the model is told why, as the call's error, and may
                # call again. Shown (and echoed back to the model) with none: not every OpenAI-compatible server
                # takes back arguments that are not JSON.
                calls.append(ToolCall(call.id, name, {}, error=f"{exc} The tool was not called; call it again."))
        return ModelTurn(text=message.content, tool_calls=calls)


def _wire_name(name: str) -> str:
    # OpenAI tool names allow [A-Za-z0-9_-] only.
    return name.replace(".", "__")
