"""HTTP routes: the two chat surfaces, the answer endpoint and health."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from elicithub.core import jsonwire
from elicithub.core.elicitation import Answer
from elicithub.core.events import ElicitationResolved, StreamEvent
from elicithub.core.ids import CONVERSATION_ID_PATTERN
from elicithub.core.jsonwire import JsonObject
from elicithub.core.runs import Message
from elicithub.runtime.conversations import Caller
from elicithub.server.hub import Hub
from elicithub.server.identity import ANONYMOUS_COOKIE
from elicithub.server.openapi import EventStream, errors, stream
from elicithub.server.streaming import Writer, parse_event_id, sse
from elicithub.surfaces.openai_sse import OpenAIChunkWriter
from elicithub.surfaces.ui_stream import HEADERS as UI_HEADERS
from elicithub.surfaces.ui_stream import UIMessageStreamWriter


class _WireRequest(Request):
    """A request whose JSON body is read as the hub reads any JSON: a number no stream could carry (NaN, Infinity,
    1e999) is refused with 422 before a route sees it."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = jsonwire.loads(await self.body())
            except jsonwire.BadNumber as exc:
                raise HTTPException(422, f"body: {exc}.") from None
        return self._json


class _WireRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def wired(request: Request) -> Response:
            return await handler(_WireRequest(request.scope, request.receive))

        return wired


router = APIRouter(route_class=_WireRoute)


async def get_hub(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub


async def current_user(request: Request, hub: Annotated[Hub, Depends(get_hub)]) -> str | None:
    return await hub.identity.of(request)


async def current_caller(request: Request, hub: Annotated[Hub, Depends(get_hub)]) -> Caller:
    supports = request.headers.get("x-supports-elicitation", "").strip().lower() == "true"
    user = await hub.identity.of(request)
    if user is not None:
        return Caller(user, supports)
    if not hub.config.auth.anonymous:
        challenge = hub.identity.challenge(invalid_token=False)
        raise HTTPException(401, "Sign in: this hub takes no anonymous chat.", headers={"WWW-Authenticate": challenge})
    return Caller(None, supports, anonymous=hub.identity.anonymous_secret(request) or secrets.token_urlsafe(32))


HubDep = Annotated[Hub, Depends(get_hub)]
UserDep = Annotated[str | None, Depends(current_user)]
CallerDep = Annotated[Caller, Depends(current_caller)]

# Documented, not enforced here: Conversations refuses any other id with 400.
_ID: dict[str, JsonValue] = {"pattern": CONVERSATION_ID_PATTERN}
ConversationIdPath = Annotated[str, Path(description="The conversation.", json_schema_extra=_ID)]


class ElicitationResponse(BaseModel):
    """An answer, as POSTed to /run/api/elicitation-responses or sent as a chat message part."""

    model_config = ConfigDict(extra="ignore")

    conversationId: str | None = None
    elicitationId: str = Field(min_length=1)
    action: Literal["accept", "decline", "cancel"]
    content: JsonObject | None = None


class ResponseBody(ElicitationResponse):
    conversationId: str = Field(min_length=1)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[JsonObject] | JsonObject | None = None


class ChatCompletionsBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1, description="The last message must be the user's.")
    stream: Literal[True] = Field(description="This endpoint only streams.")


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | None = None
    role: Literal["system", "user", "assistant"]
    parts: list[JsonObject] = []


class UIChatBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(
        min_length=1, description="The conversation: 1-128 characters of A-Z a-z 0-9 . _ ~ -", json_schema_extra=_ID
    )
    messages: list[UIMessage] = Field(min_length=1, description="The last message must be the user's.")
    agent: str | None = Field(None, description="Which agent answers (config agents:); default the first.")


def _parse_answer(raw: Any) -> ElicitationResponse:
    try:
        return ElicitationResponse.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())
        raise HTTPException(422, f"elicitation-response: {problems}") from None


@router.get("/healthz")
async def healthz(hub: HubDep) -> dict[str, Any]:
    return {
        "status": "ok",
        "instance": hub.instance,
        "pendingElicitations": hub.broker.pending_here(),
        "openStreams": hub.conversations.readers("chat"),
        "reattachedStreams": hub.conversations.readers("reattached"),
        "runs": hub.conversations.running(),
    }


@router.post("/run/api/elicitation-responses", responses=errors(400, 401, 404, 409, 410, 413, 422))
async def elicitation_responses(body: ResponseBody, hub: HubDep, caller: CallerDep) -> dict[str, str]:
    answer = Answer(body.action, body.content)
    answered = await hub.conversations.answer(caller, body.elicitationId, answer, body.conversationId)
    return {"elicitationId": answered.resolution.elicitation_id, "outcome": answered.resolution.outcome}


async def _chat(
    hub: Hub,
    caller: Caller,
    conversation_id: str | None,
    message: str | ElicitationResponse,
    make_writer: Callable[[str | None], Writer],
    headers: dict[str, str],
    history: list[Message] | None = None,
    agent: str | None = None,
) -> Response:
    """Send a message to `agent` (and stream its run), or take an answer (and stream the continuation).

    `make_writer(message_id)` makes the surface's writer; a new run's message is named after the run, so a
    replay of it names it the same, and a continuation gets a new name (None)."""
    keepalive = hub.config.streams.keepalive_s
    conversations = hub.conversations
    if isinstance(message, ElicitationResponse):
        # The fast path: the answer, then the continuation here, unless a reader here already follows the run.
        answer = Answer(message.action, message.content)
        answered = await conversations.answer(
            caller, message.elicitationId, answer, conversation_id or message.conversationId
        )
        headers = {**headers, "x-conversation-id": answered.conversation_id}
        writer = make_writer(None)
        if answered.followed:
            resolved = ElicitationResolved(answered.resolution.elicitation_id, answered.resolution.outcome)
            return sse(writer, answered.run_id, [(answered.after, resolved)], keepalive_s=keepalive, headers=headers)
        followed = await conversations.follow(
            caller, answered.conversation_id, run_id=answered.run_id, after=answered.after
        )
        # A client that builds each assistant message on its own needs the continued call's input first.
        first: list[StreamEvent] = [answered.call] if answered.call is not None else []
    else:
        chosen = hub.config.agent(agent).id  # a name that is no agent's (a fixed model name) means the default
        sent = await conversations.send(caller, conversation_id, message, history=history, agent=chosen)
        headers = {**headers, "x-conversation-id": sent.conversation_id}
        writer = make_writer(sent.run_id)
        followed = await conversations.follow(caller, sent.conversation_id, run_id=sent.run_id, after=sent.after)
        first = []
    response = sse(writer, followed.run_id, followed.events, keepalive_s=keepalive, headers=headers, first=first)
    if caller.anonymous is not None:
        # Sent again each time, so the browser keeps it as long as it keeps chatting.
        response.set_cookie(
            ANONYMOUS_COOKIE,
            caller.anonymous,
            max_age=int(hub.config.conversations.retention_s),
            path="/run/",
            httponly=True,
            samesite="lax",
            secure=hub.config.public_url.startswith("https://"),
        )
    return response


def _openai_text(content: str | list[JsonObject] | JsonObject | None) -> str | ElicitationResponse:
    if isinstance(content, dict):
        return _parse_answer(content) if content.get("type") == "elicitation-response" else json.dumps(content)
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    text = content or ""
    if text.lstrip().startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:  # not JSON (or too long a number to read): words the person typed
            return text
        if isinstance(parsed, dict) and parsed.get("type") == "elicitation-response":
            try:
                jsonwire.loads(text)
            except jsonwire.BadNumber as exc:
                raise HTTPException(422, f"messages[-1].content: {exc}.") from None
            return _parse_answer(parsed)
    return text


@router.post(
    "/run/v1/chat/completions",
    response_class=EventStream,
    responses=stream("`chat.completion.chunk` events, then `[DONE]`.", 400, 401, 404, 409, 410, 413, 422),
)
async def chat_completions(
    body: ChatCompletionsBody,
    hub: HubDep,
    caller: CallerDep,
    x_conversation_id: Annotated[
        str | None, Header(description="The conversation; a new one when absent.", json_schema_extra=_ID)
    ] = None,
) -> Response:
    last = body.messages[-1]
    if last.role != "user":
        raise HTTPException(400, f"messages[{len(body.messages) - 1}].role: the last message must be from the user.")
    # Validated as ChatMessage: a role, and content of one of the shapes a Message may have.
    history = [cast(Message, m.model_dump(exclude_none=True)) for m in body.messages[:-1]]
    model = body.model or hub.model.name
    message = _openai_text(last.content)
    return await _chat(
        hub, caller, x_conversation_id, message, lambda _: OpenAIChunkWriter(model), {}, history, agent=body.model
    )


def _ui_text(message: UIMessage) -> str | ElicitationResponse:
    for part in message.parts:
        if part.get("type") == "elicitation-response":
            return _parse_answer(part)
        if part.get("type") == "data-elicitation-response" and isinstance(part.get("data"), dict):
            return _parse_answer(part["data"])
    return "".join(str(p.get("text", "")) for p in message.parts if p.get("type") == "text")


@router.post(
    "/run/api/chat",
    response_class=EventStream,
    responses=stream("The AI SDK UI message stream, then `[DONE]`.", 400, 401, 404, 409, 410, 413, 422),
)
async def ui_chat(body: UIChatBody, hub: HubDep, caller: CallerDep) -> Response:
    last = body.messages[-1]
    if last.role != "user":
        raise HTTPException(400, f"messages[{len(body.messages) - 1}].role: the last message must be from the user.")
    agent = body.agent
    return await _chat(hub, caller, body.id, _ui_text(last), UIMessageStreamWriter, UI_HEADERS, agent=agent)


_REATTACH: dict[str, Any] = {
    "response_class": EventStream,
    "responses": {
        **stream("The run after `Last-Event-ID`, or the active run, as a UI message stream.", 400, 401, 404, 422),
        204: {"description": "Nothing follows `Last-Event-ID`, and no run is active in this conversation."},
    },
}


@router.get("/run/api/conversations/{conversation_id}/stream", **_REATTACH)
@router.get("/run/api/chat/{conversation_id}/stream", **_REATTACH)
async def reattach(
    conversation_id: ConversationIdPath,
    hub: HubDep,
    caller: CallerDep,
    last_event_id: Annotated[
        str | None, Header(description="`RUN:SEQ` of the last event read; any other value reads from the start.")
    ] = None,
) -> Response:
    """Read a run again (UI message stream): after `Last-Event-ID` the rest of the run it names, through its
    end even when that came meanwhile; else the active run from its start; 204 when neither has anything."""
    resume = parse_event_id(last_event_id)
    followed = await hub.conversations.reattach(caller, conversation_id, resume)
    if followed is None:
        return Response(status_code=204)
    headers = {**UI_HEADERS, "x-conversation-id": conversation_id}
    writer = UIMessageStreamWriter(followed.run_id)
    return sse(writer, followed.run_id, followed.events, keepalive_s=hub.config.streams.keepalive_s, headers=headers)
