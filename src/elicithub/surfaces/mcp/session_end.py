"""An MCP session's end (its client's DELETE) ordered after the notifications and responses still being handed to it.

The SDK's transport answers such a POST 202 first and passes the message on to the session after; a DELETE landing
in between closes the session under it, and the SDK then logs a `ClosedResourceError` and writes a 500 after the
202 (uvicorn's "Unexpected ASGI message" traceback). A client that gives up on a call sends `notifications/cancelled`
and its DELETE together, so this is ordinary: here a DELETE waits for the session's messages in hand, and those that
come while it ends wait for it (the SDK then answers them 404, the session being gone).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections import Counter

from starlette.types import ASGIApp, Receive, Scope, Send

from elicithub.surfaces import body_first


class SessionEnd:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.handing: Counter[str] = Counter()
        """By session: its notifications and responses being handed to it now."""
        self.ending: set[str] = set()
        """Sessions whose DELETE is being served."""
        self.changed = asyncio.Condition()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = _session_of(scope)
        if session is None or scope["method"] not in ("POST", "DELETE"):
            await self.app(scope, receive, send)
        elif scope["method"] == "DELETE":
            await self._end(session, scope, receive, send)
        else:
            await body_first(functools.partial(self._posted, session), scope, receive, send)

    async def _posted(self, session: str, body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        if _is_request(body):  # a request's answer may take the whole call: ending ends it
            await self.app(scope, receive, send)
        else:
            await self._hand(session, scope, receive, send)

    async def _end(self, session: str, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: session not in self.ending and not self.handing[session])
            self.ending.add(session)
        try:
            await self.app(scope, receive, send)
        finally:
            async with self.changed:
                self.ending.discard(session)
                self.changed.notify_all()

    async def _hand(self, session: str, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: session not in self.ending)
            self.handing[session] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            async with self.changed:
                self.handing[session] -= 1
                if not self.handing[session]:
                    del self.handing[session]
                self.changed.notify_all()


def _session_of(scope: Scope) -> str | None:
    if scope["type"] != "http":
        return None
    value = next((v for k, v in scope["headers"] if k.lower() == b"mcp-session-id"), None)
    return value.decode("latin-1") if value is not None else None


def _is_request(body: bytes) -> bool:
    """Whether the POSTed body is a JSON-RPC request (a method and an id); the SDK answers anything else at once."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and "method" in message and "id" in message
