"""Turning a run's stream into an SSE response, in whichever surface's format."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Protocol

from sse_starlette import EventSourceResponse, ServerSentEvent

from elicithub.core.events import RunFinished, StreamEvent


class Writer(Protocol):
    def start(self) -> list[str]: ...

    def write(self, event: StreamEvent) -> list[str]: ...


Next = Callable[[], Awaitable[tuple[str | None, StreamEvent]]]
"""The next event to write, with its SSE id (None: no id)."""


def sse(
    writer: Writer,
    events: asyncio.Queue[StreamEvent] | list[StreamEvent],
    *,
    keepalive_s: float,
    headers: Mapping[str, str],
    cleanup: AsyncExitStack | None = None,
) -> EventSourceResponse:
    """An SSE response that writes events until RunFinished, with keep-alive comments while idle."""

    async def next_event() -> tuple[str | None, StreamEvent]:
        return None, events.pop(0) if isinstance(events, list) else await events.get()

    return _response(_body(writer, next_event, cleanup), keepalive_s, headers)


def sse_followed(
    writer: Writer,
    stream_id: str,
    events: asyncio.Queue[tuple[int, StreamEvent]],
    *,
    keepalive_s: float,
    headers: Mapping[str, str],
    cleanup: AsyncExitStack | None = None,
) -> EventSourceResponse:
    """Like `sse`, with an `id:` on every event (`STREAM:SEQ`) so a reader can resume after `Last-Event-ID`."""

    async def next_event() -> tuple[str | None, StreamEvent]:
        seq, event = await events.get()
        return f"{stream_id}:{seq}", event

    return _response(_body(writer, next_event, cleanup), keepalive_s, headers)


async def _body(writer: Writer, next_event: Next, cleanup: AsyncExitStack | None) -> AsyncIterator[ServerSentEvent]:
    try:
        for line in writer.start():
            yield ServerSentEvent(data=line)
        while True:
            event_id, event = await next_event()
            for line in writer.write(event):
                yield ServerSentEvent(data=line, id=event_id)
            if isinstance(event, RunFinished):
                return
    finally:
        if cleanup is not None:
            await cleanup.aclose()


def _response(
    body: AsyncIterator[ServerSentEvent], keepalive_s: float, headers: Mapping[str, str]
) -> EventSourceResponse:
    return EventSourceResponse(
        body,
        headers=dict(headers),
        ping=keepalive_s,
        ping_message_factory=lambda: ServerSentEvent(comment="keep-alive"),
        sep="\n",
    )
