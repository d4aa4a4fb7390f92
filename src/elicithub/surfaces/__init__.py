"""Surfaces: the wire formats that carry a run's stream to a person's client, and what they share.

A surface that serves its own protocol (the MCP server, the A2A server) is a `Surface`: routes the app mounts,
and a lifespan the app runs. Adding one is listing it in `Hub.surfaces`; routes.py never changes for it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicithub.core import jsonwire
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


class FiniteNumbers:
    """A JSON-RPC endpoint that never sees a number JSON cannot carry (NaN, Infinity, 1e999): a POSTed body holding
    one gets JSON-RPC's parse error (-32700) with HTTP `status`, the protocol's own for a parse error."""

    def __init__(self, app: ASGIApp, status: int) -> None:
        self.app = app
        self.status = status

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        read: list[Message] = []
        while not read or (read[-1]["type"] == "http.request" and read[-1].get("more_body")):
            read.append(await receive())
        if read[-1]["type"] == "http.request":
            try:
                jsonwire.loads(b"".join(m.get("body", b"") for m in read))
            except jsonwire.BadNumber as exc:
                await _parse_error(send, self.status, str(exc))
                return
            except ValueError:
                pass  # not JSON at all: the protocol server says so in its own words

        async def replayed() -> Message:
            return read.pop(0) if read else await receive()

        await self.app(scope, replayed, send)


async def _parse_error(send: Send, status: int, why: str) -> None:
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {why}."}}
    body = jsonwire.dumps(error).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
