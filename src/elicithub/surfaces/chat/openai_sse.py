"""OpenAI-compatible `chat.completion.chunk` SSE; elicitation events ride as JSON in delta.content."""

from __future__ import annotations

import time
from typing import Any, Literal, TypedDict

from elicithub.core.elicitation import new_id
from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    RunFinished,
    StreamEvent,
    TextDelta,
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


class Chunk(TypedDict):
    """A `chat.completion.chunk`, as the hub writes one (one choice)."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[Choice]


def _content(event: Any) -> str:
    """An elicitation event as the text of a chunk's delta (each stream's chunks differ, in their ids)."""
    return dumps(event, compact=False)


class OpenAIChunkWriter:
    event_ids = False
    ended = False

    def __init__(self, model: str) -> None:
        self.id = new_id("chatcmpl")
        self.model = model
        self.created = int(time.time())

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
        if isinstance(event, RunFinished):
            return self.end()
        # Tool calls run inside the hub; an OpenAI client only sees their results through the model's text.
        return []

    def end(self) -> list[str]:
        return [self._chunk({}, "stop"), DONE]
