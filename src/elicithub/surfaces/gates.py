"""The gates the protocol surfaces share: who a bearer token belongs to, an endpoint only the hub's users reach, a
JSON-RPC endpoint that refuses numbers JSON cannot carry, and how a refused answer, or a run the limits refuse, is
reported."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from elicithub.core import jsoncodec
from elicithub.errors import IdentityUnavailable, InvalidContent, Limited
from elicithub.surfaces import body_first


class Bearer(Protocol):
    """Who a bearer token belongs to (the hub's `Identity`)."""

    def user_for(self, token: str) -> str | None:
        """At once, with the identity provider's keys as last fetched: for SDK hooks that cannot await."""

    async def authenticate(self, token: str) -> str | None:
        """May fetch the provider's keys first; raises `IdentityUnavailable` if they cannot be had."""

    def challenge(self, path: str = "", *, invalid_token: bool) -> str: ...


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
    """A protocol server's endpoint that only the hub's users reach: anyone else gets 401 with a bearer challenge
    naming `path`'s resource metadata, or 503 when the identity provider is out of reach. An object, not a
    function, so Starlette hands it the raw request for the SDK's own app to answer."""

    def __init__(self, endpoint: ASGIApp, bearer: Bearer, path: str) -> None:
        self.endpoint = endpoint
        self.bearer = bearer
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        token = bearer_token(headers.get("authorization"))
        try:
            # Awaited here, so the SDK's own hooks behind the gate find the provider's keys in place.
            user = await self.bearer.authenticate(token) if token is not None else None
        except IdentityUnavailable as exc:
            await _json_error(send, 503, exc.code, str(exc), [])
            return
        if user is not None:
            await self.endpoint(scope, receive, send)
            return
        challenge = self.bearer.challenge(self.path, invalid_token="authorization" in headers)
        message = "A bearer token of one of the hub's users is needed."
        await _json_error(send, 401, "unauthorized", message, [(b"www-authenticate", challenge.encode("latin-1"))])


async def _json_error(send: Send, status: int, code: str, message: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [*headers, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def field_errors(exc: InvalidContent) -> list[dict[str, str]]:
    """An answer's content refused: one `{field, message}` per field, as every surface reports it."""
    return [{"field": e.field, "message": e.message} for e in exc.errors]


def refusal(exc: InvalidContent) -> str:
    """The refusal in one line, each field's problem named, for a protocol error that carries only a message."""
    return f"{exc} " + "; ".join(f"{e.field}: {e.message}" for e in exc.errors)


LIMITED = -32000
"""The JSON-RPC error code of a request the limits refuse (the first code JSON-RPC leaves to servers), where the chat
surfaces answer 429 or 503: its `data` (`limited_data`) says which and when to try again."""


def limited_data(exc: Limited) -> dict[str, object]:
    """What a protocol error carries of a refusal by the limits: the hub's error code (`rate_limited`, `overloaded`,
    as every surface names it) and `retryAfter`, in seconds (the chat surfaces' `Retry-After`)."""
    return {"code": exc.code, "retryAfter": exc.retry_after_s}


class FiniteNumbers:
    """A JSON-RPC endpoint that never sees a number JSON cannot carry (NaN, Infinity, 1e999): a POSTed body holding
    one gets JSON-RPC's parse error (-32700) with HTTP `status`, the protocol's own for a parse error."""

    def __init__(self, app: ASGIApp, status: int) -> None:
        self.app = app
        self.status = status

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
        else:
            await body_first(self._parsed, scope, receive, send)

    async def _parsed(self, body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            jsoncodec.loads(body)
        except jsoncodec.BadNumber as exc:
            await _parse_error(send, self.status, str(exc))
            return
        except ValueError:
            pass  # not JSON at all: the protocol server says so in its own words
        await self.app(scope, receive, send)


async def _parse_error(send: Send, status: int, why: str) -> None:
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {why}."}}
    body = jsoncodec.dumps(error).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
