"""The shapes the endpoints answer in, as /openapi.json documents them: the error body, and SSE for the streams."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from starlette.responses import Response


class FieldProblem(BaseModel):
    field: str
    message: str


class ErrorDetail(BaseModel):
    code: str
    message: str
    fields: list[FieldProblem] | None = None


class ErrorBody(BaseModel):
    """Every error: `{"error": {"code", "message"}}`; a 422 for answer content also lists `fields`."""

    error: ErrorDetail


class EventStream(Response):
    """The response class of a streaming route, for the documentation only (the routes return an SSEResponse).
    It names no media type: `stream()` documents the 200 as text/event-stream, and FastAPI then
    documents the errors as the JSON they are."""


_WHY = {
    400: "Malformed input: a conversation id outside its pattern, a body that cannot be used.",
    401: "A bearer token that names no user.",
    403: "An approval of the caller's own call, whose policy does not let them approve it (code `self_approval`).",
    404: "Unknown, or another user's.",
    409: "Already resolved with a different answer.",
    410: "Expired.",
    413: "The body is larger than limits.max_body_bytes.",
    422: (
        "The body does not fit this endpoint (a number JSON cannot carry, such as NaN or 1e999, included), or "
        "answer content does not fit the question (one error per field)."
    ),
    429: "Over one of the caller's limits (limits.per_user, code `rate_limited`); `Retry-After` says when to retry.",
    503: "The hub holds as many runs as it may (limits.max_active_runs, code `overloaded`); see `Retry-After`.",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody, "description": _WHY[status]} for status in statuses}


_EVENT = {
    "type": "object",
    "properties": {
        "data": {"type": "string", "description": "JSON, or `[DONE]` at the end."},
        "event": {"type": "string"},
        "id": {"type": "string", "description": "`RUN:SEQ`, for `Last-Event-ID`."},
        "retry": {"type": "integer", "minimum": 0},
    },
    "required": ["data"],
}
"""One server-sent event (OpenAPI 3.2's `itemSchema`, as FastAPI's own SSE routes document theirs)."""


def stream(description: str, *statuses: int, event: dict[str, Any] = _EVENT) -> dict[int | str, dict[str, Any]]:
    """A stream's 200 (each `event` as its schema says) and the errors of `statuses`."""
    sse = {"content": {"text/event-stream": {"itemSchema": event}}, "description": description}
    return {200: sse, **errors(*statuses)}
