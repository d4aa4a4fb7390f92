"""A request body limit for the whole app: a body past it is refused with 413 before anything reads it whole."""

from __future__ import annotations

import json

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Refuses a body whose Content-Length is over `max_bytes`, or that grows past it while it streams in."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if declared_over(scope, self.max_bytes):
            await payload_too_large(self.max_bytes)(scope, receive, send)
            return
        received = 0
        too_large = started = False

        async def counted() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Stop reading: to the app the client is gone, and what it answers is not sent.
                    too_large = True
                    return {"type": "http.disconnect"}
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if too_large and not started:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except Exception:
            if not too_large:
                raise
        if too_large and not started:
            await payload_too_large(self.max_bytes)(scope, receive, send)


def declared_over(scope: Scope, max_bytes: int) -> bool:
    """Whether the request's Content-Length says its body is over `max_bytes`."""
    declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
    return declared is not None and declared.isdigit() and int(declared) > max_bytes


def payload_too_large(max_bytes: int) -> Response:
    message = f"The request body is larger than {max_bytes} bytes (limits.max_body_bytes)."
    body = json.dumps({"error": {"code": "payload_too_large", "message": message}}).encode()
    return Response(body, status_code=413, headers={"content-type": "application/json"})
