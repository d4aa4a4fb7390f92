"""What /openapi.json says the endpoints answer: the real error bodies and statuses, and SSE for the streams."""

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
    """Documents a streaming response (the routes return sse-starlette responses)."""

    media_type = "text/event-stream"


_WHY = {
    400: "Malformed input: a bad conversation id, a body that cannot be used.",
    401: "A bearer token that names no user.",
    404: "Unknown, or another user's.",
    409: "Already resolved with a different answer.",
    410: "Expired.",
    413: "The body is larger than limits.max_body_bytes.",
    422: "The body does not fit this endpoint, or answer content does not fit the question (one error per field).",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody, "description": _WHY[status]} for status in statuses}


def stream(description: str, *statuses: int) -> dict[int | str, dict[str, Any]]:
    sse = {"content": {"text/event-stream": {"schema": {"type": "string"}}}, "description": description}
    return {200: sse, **errors(*statuses)}
