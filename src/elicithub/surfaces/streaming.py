"""Turning a run's events into an SSE response, in whichever surface's format, written straight to the transport."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from typing import NamedTuple, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from elicithub.core.events import RunFinished, StreamEvent
from elicithub.runtime.stream import LivePosition


class Writer(Protocol):
    event_ids: bool
    """Whether events carry `id: RUN:SEQ` (for `Last-Event-ID`). The OpenAI surface's don't: the openai client
    repeats the last id on a keep-alive comment's blank line and then fails to parse an empty event."""
    ended: bool
    """Whether the last write ended the stream before its run ends (the run waits for the client's next request)."""

    def start(self) -> list[str]: ...

    def write(self, event: StreamEvent) -> list[str]: ...

    def end(self) -> list[str]:
        """What closes a stream that stops before its run finishes."""


Events = AsyncIterator[tuple[int, StreamEvent]] | Iterable[tuple[int, StreamEvent]]

KEEPALIVE = b": keep-alive\r\n\r\n"
"""An SSE comment: proxies see traffic on an idle stream, readers skip it."""

_RECANCEL_S = 0.05


class OpenStreams:
    """The SSE responses being written. A shutdown ends them at once, as if their clients had left (their runs are
    on record and their readers reattach), instead of holding it until the server's grace period is over."""

    def __init__(self) -> None:
        self._open: set[SSEResponse] = set()

    def __len__(self) -> int:
        return len(self._open)

    def add(self, response: SSEResponse) -> None:
        self._open.add(response)

    def discard(self, response: SSEResponse) -> None:
        self._open.discard(response)

    def end_all(self) -> None:
        for response in list(self._open):
            response.end()


class SSEResponse(Response):
    """An SSE response: headers at once, then each event's frames in one write as the event comes, and a keep-alive
    comment after `keepalive_s` without a write. One task beside the response's own watches the client (the only
    way to hear that it left while the run is idle) and sends the keep-alives; when the client goes away the
    response stops and closes its frames, so the run no longer counts the reader."""

    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncGenerator[tuple[bytes, bool], None],
        *,
        keepalive_s: float,
        headers: Mapping[str, str],
        streams: OpenStreams,
    ) -> None:
        self.status_code = 200
        self.background = None
        self._frames = frames
        self._keepalive_s = keepalive_s
        self._written = 0.0
        self._gone = False
        self._stopping = False
        self._cancels = 0
        self._streams = streams
        self._watcher: asyncio.Task[None] | None = None
        self._ending = False
        # The headers and their order sse-starlette gave these streams, so proxies treat them as before.
        self.init_headers(
            {**headers, "cache-control": "no-store", "connection": "keep-alive", "x-accel-buffering": "no"}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        streaming = asyncio.current_task()
        assert streaming is not None
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        self._written = loop.time()
        watcher = self._watcher = loop.create_task(self._watch(receive, send, streaming))
        self._streams.add(self)
        try:
            last = False
            async for chunk, last in self._frames:
                if last:
                    watcher.cancel()  # before the last message: a keep-alive must not follow it
                self._written = loop.time()
                await send({"type": "http.response.body", "body": chunk, "more_body": not last})
            if not last:
                watcher.cancel()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            self._stopping = True
            # The watcher's cancellations, when the client left, end the response; any other goes on up.
            left = streaming.cancelling()
            for _ in range(self._cancels):
                left = streaming.uncancel()
            if not self._gone or left > 0:
                raise
            if self._ending:
                # Ended by the server (a drain), not the client: close the body properly, so that the reader
                # sees a stream that ended before its run did, and reattaches with `Last-Event-ID`.
                with contextlib.suppress(OSError):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._streams.discard(self)
            watcher.cancel()
            await self._frames.aclose()

    def end(self) -> None:
        """Stop writing (the server shuts down): the body ends where it is, before the run does."""
        if self._watcher is not None and not self._gone:
            self._ending = True
            self._watcher.cancel()

    async def _watch(self, receive: Receive, send: Send, streaming: asyncio.Task[None]) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    async with asyncio.timeout_at(self._written + self._keepalive_s):
                        message = await receive()
                except TimeoutError:
                    if loop.time() >= self._written + self._keepalive_s:
                        self._written = loop.time()
                        await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                    continue
                if message["type"] == "http.disconnect":
                    break
        except OSError:
            pass  # a server that reports a gone client by failing the send (ASGI 2.4)
        except asyncio.CancelledError:
            if not self._ending:
                raise  # the response ended on its own
        self._gone = True
        # Cancelled again until the response takes it: a wait it cancels may swallow a cancellation that comes
        # just as what it waits for does (asyncio.wait_for in Python 3.11), and the response would wait on.
        while not self._stopping:
            self._cancels += 1
            streaming.cancel()
            await asyncio.sleep(_RECANCEL_S)


def sse(
    writer: Writer,
    run_id: str,
    events: Events,
    *,
    keepalive_s: float,
    headers: Mapping[str, str],
    streams: OpenStreams,
    first: list[StreamEvent] | None = None,
) -> SSEResponse:
    """An SSE response that writes a run's events (each with `id: RUN:SEQ`, for `Last-Event-ID`) until the run
    finishes or the events end, with keep-alive comments while idle. `first` are written before them (no id).
    `streams`: the open responses a shutdown ends."""
    frames = _frames(writer, run_id, events, first or [])
    return SSEResponse(frames, keepalive_s=keepalive_s, headers=headers, streams=streams)


def _data(lines: list[str], event_id: str | None = None) -> bytes:
    head = "" if event_id is None else f"id: {event_id}\r\n"
    return "".join(f"{head}data: {line}\r\n\r\n" for line in lines).encode()


async def _frames(
    writer: Writer, run_id: str, events: Events, first: list[StreamEvent]
) -> AsyncGenerator[tuple[bytes, bool], None]:
    """Each event's frames as one chunk, and whether it is the last (it then ends the response in the same write);
    the writer's start and `first` as the first."""
    yield _data(writer.start() + [line for event in first for line in writer.write(event)]), False
    if not isinstance(events, AsyncIterator):
        events = _aiter(events)
    try:
        async for seq, event in events:
            lines = writer.write(event)
            finished = isinstance(event, RunFinished) or writer.ended
            if lines:
                yield _data(lines, event_id(run_id, seq) if writer.event_ids else None), finished
            if finished:
                return
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    yield _data(writer.end()), True


async def _aiter(events: Iterable[tuple[int, StreamEvent]]) -> AsyncIterator[tuple[int, StreamEvent]]:
    for item in events:
        yield item


_MAX_SEQ_DIGITS = 18
"""Every position the hub writes fits a signed 64-bit integer (what the stores index); a longer one is not ours."""


class EventId(NamedTuple):
    """A `Last-Event-ID` of ours: the run, its log position, and inside a model turn that streamed there how many
    characters of its text and thinking the reader had."""

    run_id: str
    seq: int
    read: tuple[int, int] = (0, 0)


def event_id(run_id: str, seq: int) -> str:
    """`RUN:SEQ`, or inside a streaming model turn `RUN:SEQ:TEXT.THINKING` (runtime/stream.py's LivePosition)."""
    if isinstance(seq, LivePosition):
        return f"{run_id}:{int(seq)}:{seq.text}.{seq.reasoning}"
    return f"{run_id}:{seq}"


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= _MAX_SEQ_DIGITS else None


def parse_event_id(value: str | None) -> EventId | None:
    """An `EventId` from a `Last-Event-ID` header; None when absent or not ours, whatever its length."""
    if not value:
        return None
    head, _, last = value.rpartition(":")
    read = (0, 0)
    if "." in last:  # RUN:SEQ:TEXT.THINKING
        text, _, reasoning = last.partition(".")
        counts = _number(text), _number(reasoning)
        if counts[0] is None or counts[1] is None:
            return None
        read = (counts[0], counts[1])
        head, _, last = head.rpartition(":")
    seq = _number(last)
    return EventId(head, seq, read) if head and seq is not None else None
