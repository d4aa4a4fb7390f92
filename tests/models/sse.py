"""What each provider's wire format module offers the stand-in: its stream's events and its error JSON."""

from __future__ import annotations

import json
from typing import Any, Protocol

from tests.models.script import Content, Fail, Recorded, Reply


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event carrying `data` as JSON (the SDKs parse every `data:` line as JSON)."""
    named = f"event: {event}\n" if event else ""
    return f"{named}data: {json.dumps(data)}\n\n"


class Wire(Protocol):
    """One reply in one provider's streaming format. Made per request: it numbers blocks and tool calls."""

    def __init__(self, reply: Reply, request: Recorded) -> None: ...

    def opening(self) -> list[str]:
        """The events sent as the stream opens, before the first step."""

    def content(self, step: Content) -> list[str]:
        """The events of one text, thinking or tool call step."""

    def closing(self) -> list[str]:
        """The events that end a reply that went to its end: the finish reason, the usage, the end marker."""

    def failure(self, fail: Fail) -> list[str]:
        """The provider's error event inside a stream that already opened; the stream ends after it."""

    @staticmethod
    def error_body(fail: Fail) -> dict[str, Any]:
        """The provider's error JSON, for an HTTP error before the stream opens."""
