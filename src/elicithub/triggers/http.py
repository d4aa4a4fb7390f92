"""Downstream HTTP for any trigger: one pooled client, and each call's own Authorization header on it."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx2

from elicithub import telemetry


@dataclass
class CallAuth:
    """The Authorization header of the call in progress; whether the server rejected it (401); and the scope it
    asked for when the token had too little (403 `insufficient_scope`; "" when its challenge named none)."""

    header: str | None
    rejected: bool = False
    insufficient_scope: str | None = None
    session_lost: bool = False
    """The server answered 404 to a request in an MCP session: it no longer knows the session (restarted, or
    expired it), so it ran nothing; a new session may send the request again."""


_call_auth: contextvars.ContextVar[CallAuth | None] = contextvars.ContextVar("elicithub_call_auth", default=None)


class ContextAuth(httpx2.Auth):
    """Auth for a shared client: each call's own header, from the context the call's tasks inherit."""

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        auth = _call_auth.get()
        if auth is not None and auth.header is not None:
            request.headers["Authorization"] = auth.header
        response = yield request
        if auth is None:
            return
        if response.status_code == 401:
            auth.rejected = True
        elif response.status_code == 404 and "mcp-session-id" in request.headers:
            auth.session_lost = True
        elif response.status_code == 403:
            # The MCP SDK's parser, imported by the first 403 rather than by every hub's start.
            from mcp.client.auth.utils import extract_field_from_www_auth

            if extract_field_from_www_auth(response, "error") == "insufficient_scope":
                auth.insufficient_scope = extract_field_from_www_auth(response, "scope") or ""


@contextmanager
def authorized(auth: CallAuth) -> Iterator[CallAuth]:
    """Within this block, requests made through a client with `ContextAuth` carry `auth.header`."""
    reset = _call_auth.set(auth)
    try:
        yield auth
    finally:
        _call_auth.reset(reset)


MAX_CONNECTIONS = 1024
"""Downstream connections open at once. A 2025-11-25 call holds its connections for as long as its question waits
(minutes), so the pool must outnumber the calls that wait at once; httpx's default of 100 stalled a hub continuing
100 such calls after a restart (PoolTimeout)."""


def pooled_client(
    read_timeout_s: float, wrap: Callable[[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport] | None = None
) -> httpx2.AsyncClient:
    """One pooled client for many downstream calls (building one per call costs ~20 ms of TLS setup). Its read
    timeout outlasts a question: a 2025-11-25 MCP server keeps its response open while it asks. `wrap`: a transport
    around the pool's own."""
    pool = httpx2.AsyncHTTPTransport(
        limits=httpx2.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=100)
    )
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(30, read=read_timeout_s),
        transport=pool if wrap is None else wrap(pool),
        auth=ContextAuth(),
        event_hooks=telemetry.http_hooks(),
    )
