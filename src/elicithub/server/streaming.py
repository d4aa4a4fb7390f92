"""Turning a run's events into an SSE response, in whichever surface's format."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Protocol

from sse_starlette import EventSourceResponse, ServerSentEvent

from elicithub.core.events import RunFinished, StreamEvent


class Writer(Protocol):
    event_ids: bool
    """Whether events carry `id: RUN:SEQ` (for `Last-Event-ID`). The OpenAI surface's don't: the openai client
    repeats the last id on a keep-alive comment's blank line and then fails to parse an empty event."""

    def start(self) -> list[str]: ...

    def write(self, event: StreamEvent) -> list[str]: ...

    def end(self) -> list[str]:
        """What closes a stream that stops before its run finishes."""


Events = AsyncIterator[tuple[int, StreamEvent]] | Iterable[tuple[int, StreamEvent]]


def sse(
    writer: Writer,
    run_id: str,
    events: Events,
    *,
    keepalive_s: float,
    headers: Mapping[str, str],
    first: list[StreamEvent] | None = None,
) -> EventSourceResponse:
    """An SSE response that writes a run's events (each with `id: RUN:SEQ`, for `Last-Event-ID`) until the run
    finishes or the events end, with keep-alive comments while idle. `first` are written before them (no id)."""
    return EventSourceResponse(
        _body(writer, run_id, events, first or []),
        headers=dict(headers),
        ping=keepalive_s,
        ping_message_factory=lambda: ServerSentEvent(comment="keep-alive"),
        sep="\n",
    )


async def _body(
    writer: Writer, run_id: str, events: Events, first: list[StreamEvent]
) -> AsyncIterator[ServerSentEvent]:
    for line in writer.start():
        yield ServerSentEvent(data=line)
    for event in first:
        for line in writer.write(event):
            yield ServerSentEvent(data=line)
    if not isinstance(events, AsyncIterator):
        events = _aiter(events)
    try:
        async for seq, event in events:
            event_id = f"{run_id}:{seq}" if writer.event_ids else None
            for line in writer.write(event):
                yield ServerSentEvent(data=line, id=event_id)
            if isinstance(event, RunFinished):
                return
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    for line in writer.end():
        yield ServerSentEvent(data=line)


async def _aiter(events: Iterable[tuple[int, StreamEvent]]) -> AsyncIterator[tuple[int, StreamEvent]]:
    for item in events:
        yield item


_MAX_SEQ_DIGITS = 18
"""Every position the hub writes fits a signed 64-bit integer (what the stores index); a longer one is not ours."""


def parse_event_id(value: str | None) -> tuple[str, int] | None:
    """`RUN:SEQ` from a `Last-Event-ID` header; None when absent or not ours, whatever its length."""
    if not value:
        return None
    run_id, _, seq = value.rpartition(":")
    ours = run_id and seq.isascii() and seq.isdigit() and len(seq) <= _MAX_SEQ_DIGITS
    return (run_id, int(seq)) if ours else None
