"""Surfaces: the wire formats that carry a run's stream to a person's client, and what they share.

A surface that serves its own protocol (the MCP server, the A2A server) is a `Surface`: routes the app mounts,
and a lifespan the app runs. Adding one is listing it in `Hub.surfaces`; routes.py never changes for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicithub.core import jsonwire
from elicithub.core.events import StreamEvent, TextDelta, ToolCallFinished
from elicithub.errors import InvalidContent


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


def user_of(headers: Mapping[str, str] | None, user_for: Callable[[str], str | None]) -> str | None:
    """The hub user whose bearer token a request carries; None without one, or with a token of nobody."""
    token = bearer_token(headers.get("authorization") if headers is not None else None)
    return user_for(token) if token else None


def sdk_endpoint(routes: Iterable[BaseRoute], path: str) -> ASGIApp:
    """The ASGI app a protocol SDK serves `path` with among the routes it made, to mount behind our own route."""
    return next(r for r in routes if isinstance(r, Route) and r.path == path).app


class BearerGate:
    """A protocol server's endpoint that only the hub's users reach: anyone else gets 401 with a bearer challenge.
    An object, not a function, so Starlette hands it the raw request for the SDK's own app to answer."""

    def __init__(self, endpoint: ASGIApp, user_for: Callable[[str], str | None]) -> None:
        self.endpoint = endpoint
        self.user_for = user_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if user_of(headers, self.user_for) is None:
            await unauthorized(send, invalid_token="authorization" in headers)
            return
        await self.endpoint(scope, receive, send)


def field_errors(exc: InvalidContent) -> list[dict[str, str]]:
    """An answer's content refused: one `{field, message}` per field, as every surface reports it."""
    return [{"field": e.field, "message": e.message} for e in exc.errors]


def refusal(exc: InvalidContent) -> str:
    """The refusal in one line, each field's problem named, for a protocol error that carries only a message."""
    return f"{exc} " + "; ".join(f"{e.field}: {e.message}" for e in exc.errors)


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
