"""OpenAI-compatible `chat.completion.chunk` SSE; elicitation events ride as JSON in delta.content."""

from __future__ import annotations

import time
from typing import Any, Literal, NotRequired, TypedDict

from elicithub.core.elicitation import new_id
from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    RunFinished,
    StreamEvent,
    TextDelta,
    TokenUsage,
    asked_event,
    framed,
    resolved_event,
)
from elicithub.core.jsoncodec import dumps, dumps_event

DONE = "[DONE]"


class Delta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str


class Choice(TypedDict):
    index: int
    delta: Delta
    finish_reason: Literal["stop"] | None


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Chunk(TypedDict):
    """A `chat.completion.chunk`, as the hub writes one (one choice; none in the last, usage, chunk)."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[Choice]
    usage: NotRequired[Usage]


def _content(event: Any) -> str:
    """An elicitation event as the text of a chunk's delta (each stream's chunks differ, in their ids)."""
    return dumps(event, compact=False)


class OpenAIChunkWriter:
    event_ids = False
    ended = False

    def __init__(self, model: str, usage: bool = False) -> None:
        self.id = new_id("chatcmpl")
        self.model = model
        self.created = int(time.time())
        self.usage: Usage | None = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0} if usage else None
        """What the run's model requests used so far, when the request asked for it (`stream_options`)."""

    def _chunk(self, delta: Delta, finish_reason: Literal["stop"] | None = None) -> str:
        chunk: Chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        return dumps_event(chunk)

    def start(self) -> list[str]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def write(self, event: StreamEvent) -> list[str]:
        if isinstance(event, TextDelta):
            return [self._chunk({"content": event.text})]
        if isinstance(event, ElicitationRequested):
            asked = event.elicitation
            return [self._chunk({"content": framed(event, "openai", lambda: _content(asked_event(asked)))})]
        if isinstance(event, ElicitationResolved):
            resolved = resolved_event(event.elicitation_id, event.outcome, event.answered_by)
            return [self._chunk({"content": framed(event, "openai", lambda: _content(resolved))})]
        if isinstance(event, TokenUsage):
            if self.usage is not None:
                self.usage["prompt_tokens"] += event.input_tokens
                self.usage["completion_tokens"] += event.output_tokens
                self.usage["total_tokens"] += event.input_tokens + event.output_tokens
            return []
        if isinstance(event, RunFinished):
            return self.end()
        # Tool calls run inside the hub; an OpenAI client only sees their results through the model's text.
        return []

    def end(self) -> list[str]:
        if self.usage is None:
            return [self._chunk({}, "stop"), DONE]
        last: Chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self.usage,
        }
        return [self._chunk({}, "stop"), dumps_event(last), DONE]
