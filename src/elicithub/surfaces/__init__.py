"""Surfaces: the wire formats that carry a run's stream to a person's client, and what they share.

A surface that serves its own protocol (the MCP server, the A2A server) is a `Surface`: routes the app mounts,
and a lifespan the app runs. Adding one is listing it in `Hub.surfaces`; routes.py never changes for it.
What guards the protocol surfaces' endpoints, and how they report a refused answer, is in `gates.py`.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from starlette.routing import BaseRoute
from starlette.types import Message, Receive

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


async def read_body(receive: Receive) -> tuple[bytes | None, Receive]:
    """A request's body read whole (None when the client went away first), and a `receive` that gives the app
    behind the same messages again."""
    read: list[Message] = []
    while not read or (read[-1]["type"] == "http.request" and read[-1].get("more_body")):
        read.append(await receive())
    body = b"".join(m.get("body", b"") for m in read) if read[-1]["type"] == "http.request" else None

    async def replayed() -> Message:
        return read.pop(0) if read else await receive()

    return body, replayed
