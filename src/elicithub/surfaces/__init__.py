"""Surfaces: the wire formats that carry a run's stream to a person's client, and what they share.

A surface that serves its own protocol (the MCP server, the A2A server) is a `Surface`: routes the app mounts,
and a lifespan the app runs. Adding one is listing it in `Hub.surfaces`; routes.py never changes for it.
What guards the protocol surfaces' endpoints, and how they report a refused answer, is in `gates.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, overload

from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute
from starlette.types import Message, Receive, Scope, Send

from elicithub.core.events import StreamEvent, TextDelta, ToolCallFinished
from elicithub.errors import Expired


class Surface(Protocol):
    @property
    def routes(self) -> list[BaseRoute]: ...

    def lifespan(self) -> AbstractAsyncContextManager[None]: ...


def text_after_tools(text: list[str], event: StreamEvent) -> list[str]:
    """The run's last words: text after its last tool call."""
    if isinstance(event, ToolCallFinished):
        return []
    if isinstance(event, TextDelta):
        return [*text, event.text]
    return text


def expiry(exc: Expired) -> dict[str, str]:
    """An answer to a question past its deadline refused (REST's 410), as the protocol surfaces report it: the
    error's data, `{"code": "expired", "elicitationId": ...}`."""
    return {"code": exc.code, "elicitationId": exc.elicitation_id}


@overload
async def read_body(receive: Receive) -> bytes: ...


@overload
async def read_body(receive: Receive, max_bytes: int) -> bytes | None: ...


async def read_body(receive: Receive, max_bytes: int | None = None) -> bytes | None:
    """The whole body; None when it grows past `max_bytes` (what is left of it is not read). Raises
    `ClientDisconnect` when the client goes away first."""
    chunks: list[bytes] = []
    received = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk: bytes = message.get("body", b"")
        received += len(chunk)
        if max_bytes is not None and received > max_bytes:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)  # one chunk (the usual case) is returned as it is, not copied


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` for the app behind a reader: the body read ahead, then what `receive` gives (a disconnect)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


WithBody = Callable[[bytes, Scope, Receive, Send], Awaitable[None]]
"""An ASGI app that is handed the request's whole body first."""


async def body_first(app: WithBody, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve a request with `app` once its whole body is read: `app` gets the body, and a `receive` that gives it
    again to an app behind it. A client gone before its body ends gets nothing: there is nobody to answer (or, past
    the body limit, `BodyLimit` answers 413)."""
    try:
        body = await read_body(receive)
    except ClientDisconnect:
        return
    await app(body, scope, replaying(body, receive), send)
