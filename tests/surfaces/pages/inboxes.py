"""What the inbox tests share: reading a person's inbox stream event by event, and their list."""

from __future__ import annotations

import contextlib
from typing import Any

import httpx

from tests.conftest import sse_numbered

KEEPALIVE_S = 600
"""The hubs' keep-alive in these tests: longer than a read's timeout, so an event that never comes fails the test
instead of keep-alives holding it."""


class InboxStream:
    """`GET /run/api/inbox/stream` as `token`'s person reads it: `next()` is the next event and its id ("" for
    none), `until(type, elicitation_id)` reads up to the first such event."""

    def __init__(self, url: str, token: str, last_event_id: str | None = None) -> None:
        self._stack = contextlib.ExitStack()
        headers = {"authorization": f"Bearer {token}"}
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        client = self._stack.enter_context(httpx.Client(base_url=url, headers=headers, timeout=30))
        self.response = self._stack.enter_context(client.stream("GET", "/run/api/inbox/stream"))
        assert self.response.status_code == 200, self.response.read()
        assert self.response.headers["content-type"].startswith("text/event-stream")
        self._events = sse_numbered(self.response)
        self.last_id = ""
        """The id of the last event read that had one (what a client sends as `Last-Event-ID`)."""

    def __enter__(self) -> InboxStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def next(self) -> tuple[str, dict[str, Any]]:
        event_id, event = next(self._events)
        if event_id:
            self.last_id = event_id
        return event_id, event

    def until(self, kind: str, elicitation_id: str | None = None) -> dict[str, Any]:
        while True:
            _, event = self.next()
            if event["type"] == kind and elicitation_id in (None, event.get("elicitationId")):
                return event

    def started(self) -> list[dict[str, Any]]:
        """The start of a stream that does not resume: `inbox-reset`, then every open question (to the one with an
        id)."""
        event_id, reset = self.next()
        assert reset == {"type": "inbox-reset"}, reset
        found = []
        while not event_id:
            event_id, event = self.next()
            assert event["type"] == "inbox-added", event
            found.append(event)
        return found


def listed(url: str, token: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=30) as client:
        reply = client.get("/run/api/inbox")
    assert reply.status_code == 200, reply.text
    questions: list[dict[str, Any]] = reply.json()["questions"]
    return questions
