"""A broken connection fails the one MCP request it carried, not the session every call shares.

The SDK's streamable HTTP client runs each request's POST in a task of its session's task group. A transport error
there (the server closed a connection before or while answering, a read timed out) ends that task group, and with it
the session: every call in flight on it fails with "Connection closed". Kept sessions are shared by all the calls to
one server with one credential, so one dropped connection would fail them all. Under this transport a POST that fails
before its response comes is answered instead with a JSON-RPC error (HTTP 502), and one whose JSON body breaks off
raises a stream error, which the SDK reports to that request alone; its call fails with the reason, the others go on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import orjson

CONNECTION_FAILED = -32000
"""The JSON-RPC error code the failed request gets (the SDK's own for a closed connection)."""


class BodyBrokeOff(httpx2.StreamError):
    """A response's body ended before it was complete (its connection broke)."""


class OneRequestFails(httpx2.AsyncBaseTransport):
    """Wraps the pooled transport: POSTs fail alone (see the module's docstring); other requests pass unchanged (a GET
    is the session's standalone stream, whose end the SDK already takes as its own)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            return await self.inner.handle_async_request(request)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            reason = f"the connection to the MCP server failed: {_said(exc)}"
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": CONNECTION_FAILED, "message": reason}}
            return httpx2.Response(
                502, headers={"content-type": "application/json"}, content=orjson.dumps(error), request=request
            )
        json = response.headers.get("content-type", "").startswith("application/json")
        if json and isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _Whole(response.stream)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Whole(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.inner:
                yield chunk
        except httpx2.TransportError as exc:
            raise BodyBrokeOff(f"the MCP server's response broke off: {_said(exc)}") from exc

    async def aclose(self) -> None:
        await self.inner.aclose()


def _said(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
