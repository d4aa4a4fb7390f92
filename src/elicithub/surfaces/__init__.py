"""Surfaces: the wire formats that carry a run's stream to a person's client, and what they share.

A surface that serves its own protocol (the MCP server, the A2A server) is a `Surface`: routes the app mounts,
and a lifespan the app runs. Adding one is listing it in `Hub.surfaces`; routes.py never changes for it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from elicithub.core.events import StreamEvent, TextDelta, ToolCallFinished


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


async def unauthorized(send: Send, *, invalid_token: bool) -> None:
    """401 with a bearer challenge, for a protocol endpoint reached without a token of one of the hub's users."""
    body = b'{"error":{"code":"unauthorized","message":"A bearer token of one of the hub\'s users is needed."}}'
    challenge = b'Bearer realm="elicithub"' + (b', error="invalid_token"' if invalid_token else b"")
    headers = [
        (b"content-type", b"application/json"),
        (b"www-authenticate", challenge),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class AsgiEndpoint:
    """An ASGI app as a route's endpoint: Starlette hands an object (not a function) the raw request, so a protocol
    server's own app can answer it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
