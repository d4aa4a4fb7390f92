"""The providers' models through pydantic-ai: one `ModelEntry` made into pydantic-ai's model for its provider, and
the conversation put in pydantic-ai's messages. A provider's SDK is imported only when a model of it is made."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from elicithub.config import ModelEntry
from elicithub.core import jsoncodec
from elicithub.core.runs import Message
from elicithub.errors import HubError
from elicithub.runtime.models.seam import ToolSpec

if TYPE_CHECKING:  # pydantic-ai and the providers' SDKs take seconds to import: only a configured model imports them
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model as PydanticModel
    from pydantic_ai.models import ModelRequestParameters

OPENAI_URL = "https://api.openai.com/v1"
NOT_MADE = "No result came back for this call: it may not have been made."
DEFAULT_CONTEXT_TOKENS = 128_000
"""The window of a model whose config gives none (and whose provider's profile says nothing of it)."""


class MissingKey(HubError):
    """The variable a model's config names for its key is not set: its requests cannot be made."""


def api_key(entry: ModelEntry) -> str | None:
    """The model's key, from the variable its config names (never from the config itself)."""
    return os.environ.get(entry.api_key_env) or None if entry.api_key_env else None


def build(entry: ModelEntry, http_client: Any = None) -> PydanticModel:
    """pydantic-ai's model for `entry`, speaking its provider's wire format (OpenAI's chat completions for openai
    and openai-compatible: pydantic-ai's `openai:` name would pick the Responses API). `http_client`: Google's
    (see `per_request`)."""
    key = api_key(entry)
    if key is None and entry.provider != "openai-compatible":
        # Never the SDK's own variable (ANTHROPIC_API_KEY, ...) behind the config's back.
        raise MissingKey(f"Model {entry.id} failed: the environment variable {entry.api_key_env} is not set.")
    if entry.provider in ("openai", "openai-compatible"):
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        base_url = entry.base_url or OPENAI_URL
        return OpenAIChatModel(entry.model, provider=OpenAIProvider(base_url=base_url, api_key=key or "unused"))
    if entry.provider == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel(entry.model, provider=AnthropicProvider(api_key=key, base_url=entry.base_url))
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    provider = GoogleProvider(api_key=key, base_url=entry.base_url, http_client=http_client)
    return GoogleModel(entry.model, provider=provider)


def per_request(entry: ModelEntry) -> bool:
    """Whether each request needs a model (and HTTP client) of its own: google-genai's nested stream generators
    never close the HTTP response when the stream is left early, so a stop would leave the provider streaming;
    closing the client the request was made with does."""
    return entry.provider == "google"


def settings(entry: ModelEntry) -> dict[str, Any]:
    """What every request passes on: the config's settings, and our own retries (the SDK makes none). The deadline
    is ours too (streamed.py): pydantic-ai's `request_timeout` costs a cancel scope per streamed chunk."""
    given = entry.settings.model_dump(exclude_none=True)
    return {**given, "max_retries": 0}


def wire_name(name: str) -> str:
    """A tool's name as providers take it ([A-Za-z0-9_-]): SERVER.TOOL is sent as SERVER__TOOL."""
    return name.replace(".", "__")


def our_name(wire: str, tools: list[ToolSpec]) -> str:
    """The SERVER.TOOL a model's call names (a tool not offered may be one a sign-in shows: SERVER__TOOL)."""
    return next((t.name for t in tools if wire_name(t.name) == wire), wire.replace("__", ".", 1))


def parameters(tools: list[ToolSpec]) -> ModelRequestParameters:
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    definitions = [
        ToolDefinition(name=wire_name(t.name), parameters_json_schema=t.input_schema, description=t.description)
        for t in tools
    ]
    return ModelRequestParameters(function_tools=definitions, allow_text_output=True)


def messages(conversation: list[Message], instructions: str | None) -> list[ModelMessage]:
    """The conversation in pydantic-ai's messages: what a person, a system prompt or a tool says goes in requests,
    what the model said in responses; the last request carries the agent's instructions (the system prompt)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[ModelMessage] = []
    parts: list[ModelRequestPart] = []
    names: dict[str, str] = {}  # a call's id -> the tool's name, for its result
    waiting: dict[str, str] = {}  # the calls of the last response without a result yet
    for message in conversation:
        role = message["role"]
        if role != "tool":
            # Providers refuse a call without its result: one the run's client was to make, whose next message was
            # not its result, is told as not made.
            parts.extend(ToolReturnPart(n, NOT_MADE, tool_call_id=i) for i, n in waiting.items())
            waiting = {}
        if role == "assistant":
            if parts:
                out.append(ModelRequest(parts=parts))
                parts = []
            said: list[ModelResponsePart] = []
            reasoning = message.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                signature = message.get("reasoning_signature")
                said.append(ThinkingPart(reasoning, signature=signature if isinstance(signature, str) else None))
            if message.get("content"):
                said.append(TextPart(_text(message.get("content"))))
            for call in message.get("tool_calls", []):
                name = wire_name(call["function"]["name"])
                names[call["id"]] = waiting[call["id"]] = name
                said.append(ToolCallPart(name, call["function"]["arguments"], tool_call_id=call["id"]))
            out.append(ModelResponse(parts=said or [TextPart("")]))
        elif role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            waiting.pop(call_id, None)
            content = _text(message.get("content"))
            parts.append(ToolReturnPart(names.get(call_id, "tool"), content, tool_call_id=call_id))
        elif role == "system":
            parts.append(SystemPromptPart(_text(message.get("content"))))
        else:
            parts.append(UserPromptPart(_text(message.get("content"))))
    out.append(ModelRequest(parts=parts or [UserPromptPart("")], instructions=instructions or None))
    return out


def _text(content: object) -> str:
    """A message's content as text: a client's list of parts gives its text parts, anything else its JSON."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return jsoncodec.dumps(content)
