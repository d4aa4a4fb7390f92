"""What /openapi.json says the endpoints answer: the real error bodies and statuses, and SSE for the streams."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header
from pydantic import BaseModel
from starlette.responses import Response

from elicithub.server.bodies import ID, ChatCompletionsBody, ResponseBody, UIChatBody


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


def stream(description: str, *statuses: int) -> dict[int | str, dict[str, Any]]:
    sse = {"content": {"text/event-stream": {"itemSchema": _EVENT}}, "description": description}
    return {200: sse, **errors(*statuses)}


wire_routes = APIRouter()
"""The routes served ahead of FastAPI (server/chat_routes.py), for the documentation and for FastAPI's 405 to any other
method: a POST to one of these paths never reaches the functions below, which only lend FastAPI their signatures
(the body each takes, its headers, what it answers)."""


@wire_routes.post("/run/api/elicitation-responses", responses=errors(400, 401, 403, 404, 409, 410, 413, 422))
async def elicitation_responses(body: ResponseBody) -> dict[str, str]:
    raise NotImplementedError("served by elicithub.server.chat_routes")


@wire_routes.post(
    "/run/v1/chat/completions",
    response_class=EventStream,
    responses=stream("`chat.completion.chunk` events, then `[DONE]`.", 400, 401, 404, 409, 410, 413, 422),
)
async def chat_completions(
    body: ChatCompletionsBody,
    x_conversation_id: Annotated[
        str | None, Header(description="The conversation; a new one when absent.", json_schema_extra=ID)
    ] = None,
) -> Response:
    raise NotImplementedError("served by elicithub.server.chat_routes")


@wire_routes.post(
    "/run/api/chat",
    response_class=EventStream,
    responses=stream("The AI SDK UI message stream, then `[DONE]`.", 400, 401, 404, 409, 410, 413, 422),
)
async def ui_chat(body: UIChatBody) -> Response:
    raise NotImplementedError("served by elicithub.server.chat_routes")
