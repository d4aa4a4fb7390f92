"""What the Conversations service gives back: a message taken, an answer taken, a run being read."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from elicithub.core.events import StreamEvent
from elicithub.core.runs import ToolCall
from elicithub.core.waiting import Resolution


@dataclass(frozen=True)
class Sent:
    """A message taken: its conversation, the run it started, and where to follow that run from."""

    conversation_id: str
    run_id: str
    after: int


@dataclass(frozen=True)
class Answered:
    """An answer taken, and the run it continues (follow it from `after`); `followed`: a reader here has it;
    `call`: the tool call the run was in, which a stream that shows the continuation repeats first."""

    resolution: Resolution
    conversation_id: str
    run_id: str
    after: int
    followed: bool
    call: ToolCall | None = None


Followed = AsyncGenerator[tuple[int, StreamEvent], None]


@dataclass(frozen=True)
class Following:
    """A run being read: its id, and its events as they come, each with its position in the conversation's log.
    A reader that stops early closes `events` (`aclose`), so the run no longer counts it."""

    run_id: str
    events: Followed
