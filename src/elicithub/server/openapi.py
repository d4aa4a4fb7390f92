"""What /openapi.json says the wire routes answer (the routes served ahead of FastAPI lend it their signatures), what
it says of the surfaces built by their first request, and of every discriminated union."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header
from starlette.responses import Response

from elicithub.surfaces.bodies import ID, ChatCompletionsBody, ResponseBody, UIChatBody
from elicithub.surfaces.responses import EventStream, errors, stream

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
    responses=stream("`chat.completion.chunk` events, then `[DONE]`.", 400, 401, 404, 409, 410, 413, 422, 429, 503),
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
    responses=stream("The AI SDK UI message stream, then `[DONE]`.", 400, 401, 404, 409, 410, 413, 422, 429, 503),
)
async def ui_chat(body: UIChatBody) -> Response:
    raise NotImplementedError("served by elicithub.server.chat_routes")


def described_on_demand() -> list[APIRouter]:
    """Routes that only describe a surface built by its first request (server/surfaces.py), for the app to include
    when /openapi.json is first built: their bodies are the surface's SDK's models (AG-UI's `RunAgentInput`), which a
    hub's start does without."""
    from elicithub.surfaces.chat.agui_openapi import documented

    return [documented]


def tags_required(document: Any) -> None:
    """Say, beside each `discriminator` in `document`, that its property is required. pydantic needs a discriminated
    union's tag to tell its members apart, but the JSON Schema it writes leaves the tag optional where each member
    gives it a default (AG-UI's messages' `role`, their content parts' `type`)."""
    if isinstance(document, dict):
        discriminator = document.get("discriminator")
        if isinstance(discriminator, dict) and "propertyName" in discriminator:
            required = document.setdefault("required", [])
            if discriminator["propertyName"] not in required:
                required.append(discriminator["propertyName"])
        for value in document.values():
            tags_required(value)
    elif isinstance(document, list):
        for value in document:
            tags_required(value)
