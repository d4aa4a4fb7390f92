"""HTTP routes: the two chat surfaces, the answer endpoint and health."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from elicithub.core.elicitation import Answer, new_id
from elicithub.core.errors import ElicitationError
from elicithub.core.events import ElicitationResolved, RunFinished, StreamEvent
from elicithub.server.hub import Hub
from elicithub.server.streaming import Writer, sse, sse_followed
from elicithub.surfaces.openai_sse import OpenAIChunkWriter
from elicithub.surfaces.ui_stream import HEADERS as UI_HEADERS
from elicithub.surfaces.ui_stream import UIMessageStreamWriter

router = APIRouter()


def get_hub(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub


def current_user(request: Request, hub: Annotated[Hub, Depends(get_hub)]) -> str | None:
    return hub.identity(request)


HubDep = Annotated[Hub, Depends(get_hub)]
UserDep = Annotated[str | None, Depends(current_user)]


class ElicitationResponse(BaseModel):
    """An answer, as POSTed to /run/api/elicitation-responses or sent as a chat message part."""

    model_config = ConfigDict(extra="ignore")

    conversationId: str | None = None
    elicitationId: str = Field(min_length=1)
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


class ResponseBody(ElicitationResponse):
    conversationId: str = Field(min_length=1)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | dict[str, Any] | None = None


class ChatCompletionsBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | None = None
    role: str
    parts: list[dict[str, Any]] = []


class UIChatBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    messages: list[UIMessage] = Field(min_length=1)


def _supports_elicitation(request: Request) -> bool:
    return request.headers.get("x-supports-elicitation", "").strip().lower() == "true"


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
        "pendingElicitations": hub.broker.pending_here(),
        "openStreams": hub.bus.total_subscribers(),
        "reattachedStreams": hub.bus.total_followers(),
    }


@router.post("/run/api/elicitation-responses")
async def elicitation_responses(body: ResponseBody, hub: HubDep, user: UserDep) -> dict[str, str]:
    answer = Answer(body.action, body.content)
    resolution = await hub.broker.respond(body.elicitationId, answer, user, body.conversationId)
    return {"elicitationId": resolution.elicitation_id, "outcome": resolution.outcome}


async def _chat(
    hub: Hub,
    user: str | None,
    conversation_id: str | None,
    message: str | ElicitationResponse,
    supports_elicitation: bool,
    writer: Writer,
    headers: dict[str, str],
    history: list[dict[str, Any]] | None = None,
) -> Response:
    keepalive = hub.config.streams.keepalive_s
    if isinstance(message, ElicitationResponse):
        return await _answer_in_chat(hub, user, conversation_id, message, writer, headers)
    conversation = await hub.conversations.open(conversation_id, user, history)
    headers = {**headers, "x-conversation-id": conversation.id}
    stream_id = new_id("stream")
    stack = AsyncExitStack()
    queue = await stack.enter_async_context(hub.bus.subscribe(stream_id))
    try:
        await hub.conversations.start(conversation, message, stream_id, supports_elicitation)
    except BaseException:
        await stack.aclose()
        raise
    return sse(writer, queue, keepalive_s=keepalive, headers=headers, cleanup=stack)


async def _answer_in_chat(
    hub: Hub,
    user: str | None,
    conversation_id: str | None,
    message: ElicitationResponse,
    writer: Writer,
    headers: dict[str, str],
) -> Response:
    """The fast path: answer, then stream the continuation here unless the run's own stream is still open."""
    conversation_id = conversation_id or message.conversationId
    elicitation = await hub.broker.lookup(message.elicitationId, user, conversation_id)
    headers = {**headers, "x-conversation-id": elicitation.conversation_id}
    stack = AsyncExitStack()
    queue = None
    readers = hub.bus.subscribers(elicitation.stream_id) + hub.bus.followers(elicitation.stream_id)
    if readers == 0 and hub.conversations.running_on(elicitation.conversation_id, elicitation.stream_id):
        queue = await stack.enter_async_context(hub.bus.subscribe(elicitation.stream_id))
    try:
        resolution = await hub.broker.respond(elicitation.id, Answer(message.action, message.content), user)
    except ElicitationError:
        await stack.aclose()
        raise
    keepalive = hub.config.streams.keepalive_s
    if queue is not None:
        return sse(writer, queue, keepalive_s=keepalive, headers=headers, cleanup=stack)
    events: list[StreamEvent] = [ElicitationResolved(resolution.elicitation_id, resolution.outcome), RunFinished()]
    return sse(writer, events, keepalive_s=keepalive, headers=headers)


def _openai_text(content: str | list[dict[str, Any]] | dict[str, Any] | None) -> str | ElicitationResponse:
    if isinstance(content, dict):
        return _parse_answer(content) if content.get("type") == "elicitation-response" else json.dumps(content)
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    text = content or ""
    if text.lstrip().startswith("{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(parsed, dict) and parsed.get("type") == "elicitation-response":
            return _parse_answer(parsed)
    return text


@router.post("/run/v1/chat/completions")
async def chat_completions(body: ChatCompletionsBody, request: Request, hub: HubDep, user: UserDep) -> Response:
    if not body.stream:
        raise HTTPException(400, "stream: this endpoint only streams; set stream to true.")
    last = body.messages[-1]
    if last.role != "user":
        raise HTTPException(400, f"messages[{len(body.messages) - 1}].role: the last message must be from the user.")
    history = [m.model_dump(exclude_none=True) for m in body.messages[:-1]]
    return await _chat(
        hub,
        user,
        request.headers.get("x-conversation-id"),
        _openai_text(last.content),
        _supports_elicitation(request),
        OpenAIChunkWriter(body.model or hub.model.name),
        {},
        history,
    )


def _ui_text(message: UIMessage) -> str | ElicitationResponse:
    for part in message.parts:
        if part.get("type") == "elicitation-response":
            return _parse_answer(part)
    return "".join(str(p.get("text", "")) for p in message.parts if p.get("type") == "text")


@router.post("/run/api/chat")
async def ui_chat(body: UIChatBody, request: Request, hub: HubDep, user: UserDep) -> Response:
    last = body.messages[-1]
    if last.role != "user":
        raise HTTPException(400, f"messages[{len(body.messages) - 1}].role: the last message must be from the user.")
    return await _chat(
        hub, user, body.id, _ui_text(last), _supports_elicitation(request), UIMessageStreamWriter(), UI_HEADERS
    )


def _after(last_event_id: str | None, stream_id: str) -> int | None:
    """The sequence number to resume after, when `Last-Event-ID` names this stream; else None (from the start)."""
    if not last_event_id:
        return None
    stream, _, seq = last_event_id.rpartition(":")
    return int(seq) if stream == stream_id and seq.isdigit() else None


@router.get("/run/api/conversations/{conversation_id}/stream")
async def reattach(conversation_id: str, request: Request, hub: HubDep, user: UserDep) -> Response:
    """Read a conversation's current run again (UI message stream), from the start or after `Last-Event-ID`."""
    conversation = await hub.conversations.get(conversation_id, user)
    headers = {**UI_HEADERS, "x-conversation-id": conversation.id}
    stream_id = conversation.stream_id or new_id("stream")
    after = _after(request.headers.get("last-event-id"), stream_id)
    ended = any(isinstance(event, RunFinished) for _, event in hub.bus.kept(stream_id, after))
    stack = AsyncExitStack()
    queue = await stack.enter_async_context(hub.bus.follow(stream_id, after))
    if not conversation.running and not ended:
        queue.put_nowait((0, RunFinished()))  # nothing is running here: what was kept, then the end
    return sse_followed(
        UIMessageStreamWriter(),
        stream_id,
        queue,
        keepalive_s=hub.config.streams.keepalive_s,
        headers=headers,
        cleanup=stack,
    )
