"""The chat and answer endpoints as plain ASGI routes, ahead of FastAPI: the body read and parsed once, the caller
taken from the headers, no dependency solving or response validation per request. FastAPI serves every other
route, and documents these (server/openapi.py)."""

from __future__ import annotations

import email.message
import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any, cast

import orjson
from fastapi import HTTPException
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from elicithub.core import jsoncodec
from elicithub.core.elicitation import Answer
from elicithub.core.events import ElicitationResolved, StreamEvent
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Message
from elicithub.errors import HubError, PayloadTooLarge
from elicithub.runtime.conversations import Caller
from elicithub.runtime.limits import anonymous_identities
from elicithub.server.hub import Hub
from elicithub.server.identity import ANONYMOUS_COOKIE
from elicithub.server.limits import declared_over, payload_too_large
from elicithub.server.replies import http_error, hub_error
from elicithub.surfaces import read_body
from elicithub.surfaces.bodies import (
    Body,
    ChatCompletionsBody,
    ElicitationResponse,
    ResponseBody,
    UIChatBody,
    UIMessage,
)
from elicithub.surfaces.chat.openai_sse import OpenAIChunkWriter
from elicithub.surfaces.chat.ui_approvals import approval_response, check_approval
from elicithub.surfaces.chat.ui_stream import HEADERS as UI_HEADERS
from elicithub.surfaces.chat.ui_stream import UIMessageStreamWriter
from elicithub.surfaces.streaming import Writer, sse

Route = Callable[[Request], Awaitable[Response]]

ANSWER_BODY = Body(ResponseBody)
ANSWER_PART = Body(ElicitationResponse)
CHAT_COMPLETIONS_BODY = Body(ChatCompletionsBody)
UI_CHAT_BODY = Body(UIChatBody)


async def caller_of(hub: Hub, request: Request) -> Caller:
    """Who sends a chat or an answer; 401 when no one may and no one signed in."""
    supports = request.headers.get("x-supports-elicitation", "").strip().lower() == "true"
    user = await hub.identity.of(request)
    if user is not None:
        return Caller(user, supports)
    if not hub.config.auth.anonymous:
        challenge = hub.identity.challenge(invalid_token=False)
        raise HTTPException(401, "Sign in: this hub takes no anonymous chat.", headers={"WWW-Authenticate": challenge})
    # Counted by the cookie they sent (a new one counts for nothing yet: a caller that sends none is new each time)
    # and by their address.
    sent = hub.identity.anonymous_secret(request)
    counted_as = anonymous_identities(sent, hub.client_address.of(request.scope))
    return Caller(None, supports, anonymous=sent or secrets.token_urlsafe(32), counted_as=counted_as)


class Wire:
    """The routes taken here: POST to one of these paths. Other methods go on to FastAPI, which answers 405."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._routes: dict[str, Route] = {
            "/run/api/elicitation-responses": self._answer,
            "/run/v1/chat/completions": self._chat_completions,
            "/run/api/chat": self._ui_chat,
        }

    def route(self, scope: Scope) -> str | None:
        """The path of the route taken here (no path parameters: it is its own template), or None."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root + "/"):
            path = path[len(root) :]
        return path if path in self._routes else None

    async def serve(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            response = await self._routes[path](Request(scope, receive))
        except ClientDisconnect:
            return  # nobody to answer
        except PayloadTooLarge:
            response = payload_too_large(self.hub.config.limits.max_body_bytes)
        except HubError as exc:
            response = hub_error(exc)
        except StarletteHTTPException as exc:
            response = http_error(exc.status_code, str(exc.detail), exc.headers)
        except Exception:
            # What Starlette's error middleware answers on FastAPI's routes; the server logs the exception.
            await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
            raise
        await response(scope, receive, send)

    async def _json(self, request: Request) -> Any:
        """The JSON body, as FastAPI reads a body model's: JSON when the content type says so, else the bytes (which
        then fit no model); a number JSON cannot carry is a 422 before anything else sees it."""
        max_bytes = self.hub.config.limits.max_body_bytes
        body = None if declared_over(request.scope, max_bytes) else await read_body(request.receive, max_bytes)
        if body is None:  # what is left of it is not read
            raise PayloadTooLarge()
        if not body:
            return None
        if not _is_json(request.headers.get("content-type")):
            return body
        try:
            return jsoncodec.loads(body)
        except jsoncodec.BadNumber as exc:
            raise HTTPException(422, f"body: {exc}.") from None
        except json.JSONDecodeError as exc:
            raise HTTPException(422, f"{exc.pos}: JSON decode error") from None
        except Exception:  # not UTF-8, nested past the parser's depth
            raise HTTPException(400, "There was an error parsing the body") from None

    async def _answer(self, request: Request) -> Response:
        raw = await self._json(request)
        caller = await caller_of(self.hub, request)
        body = ANSWER_BODY.validate(_given(raw))
        answer = Answer(body.action, body.content)
        caller = replace(caller, groups=await self.hub.groups_of(request, caller.user_id))
        answered = await self.hub.conversations.answer(caller, body.elicitationId, answer, body.conversationId)
        reply = {"elicitationId": answered.resolution.elicitation_id, "outcome": answered.resolution.outcome}
        return Response(orjson.dumps(reply), media_type="application/json")

    async def _chat_completions(self, request: Request) -> Response:
        raw = await self._json(request)
        caller = await caller_of(self.hub, request)
        body = CHAT_COMPLETIONS_BODY.validate(_given(raw))
        last = body.messages[-1]
        if last.role != "user":
            raise HTTPException(
                400, f"messages[{len(body.messages) - 1}].role: the last message must be from the user."
            )
        # Validated as ChatMessage: a role, and content of one of the shapes a Message may have.
        history = [cast(Message, m.model_dump(exclude_none=True)) for m in body.messages[:-1]]
        model = body.model or self.hub.model.name
        message = _openai_text(last.content)
        conversation_id = request.headers.get("x-conversation-id")
        usage = body.stream_options is not None and body.stream_options.include_usage
        return await self._chat(
            caller, conversation_id, message, lambda _: OpenAIChunkWriter(model, usage), {}, history, agent=body.model
        )

    async def _ui_chat(self, request: Request) -> Response:
        raw = await self._json(request)
        caller = await caller_of(self.hub, request)
        body = UI_CHAT_BODY.validate(_given(raw))
        last, index = body.messages[-1], len(body.messages) - 1
        native = self.hub.config.ui_stream.native_approvals
        approval = approval_response(last, index) if native and last.role == "assistant" else None
        if approval is not None:
            caller = replace(caller, groups=await self.hub.groups_of(request, caller.user_id))
            check_approval(await self.hub.conversations.question(caller, approval.answer.elicitationId))
            # The continuation goes on with the assistant message the client sent back.
            writer = partial(
                UIMessageStreamWriter,
                last.id,
                native_approvals=True,
                continues=approval.tool_call_id,
                denied=not approval.approved,
            )
            return await self._chat(
                caller, body.id, approval.answer, lambda _: writer(), UI_HEADERS, agent=body.agent, continuation=True
            )
        if last.role != "user":
            raise HTTPException(400, f"messages[{index}].role: the last message must be from the user.")
        make_writer = partial(UIMessageStreamWriter, native_approvals=native)
        return await self._chat(caller, body.id, _ui_text(last), make_writer, UI_HEADERS, agent=body.agent)

    async def _chat(
        self,
        caller: Caller,
        conversation_id: str | None,
        message: str | ElicitationResponse,
        make_writer: Callable[[str | None], Writer],
        headers: dict[str, str],
        history: list[Message] | None = None,
        agent: str | None = None,
        continuation: bool = False,
    ) -> Response:
        """Send a message to `agent` (and stream its run), or take an answer (and stream the continuation).

        `make_writer(message_id)` makes the surface's writer; a new run's message is named after the run, so a
        replay of it names it the same, and a continuation gets a new name (None). `continuation`: the answer's
        stream carries the continuation even when a reader here follows the run (a client whose message is only
        complete with it)."""
        hub = self.hub
        keepalive = hub.config.streams.keepalive_s
        conversations = hub.conversations
        if isinstance(message, ElicitationResponse):
            # The fast path: the answer, then the continuation here, unless a reader here already follows the run
            # (and shows it) and the client needs no continuation of its own.
            answer = Answer(message.action, message.content)
            answered = await conversations.answer(
                caller, message.elicitationId, answer, conversation_id or message.conversationId, own=True
            )
            headers = {**headers, "x-conversation-id": answered.conversation_id}
            writer = make_writer(None)
            if answered.followed and not continuation:
                resolution = answered.resolution
                resolved = ElicitationResolved(resolution.elicitation_id, resolution.outcome, resolution.answered_by)
                return sse(
                    writer,
                    answered.run_id,
                    [(answered.after, resolved)],
                    keepalive_s=keepalive,
                    headers=headers,
                    streams=hub.streams,
                )
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
        response = sse(
            writer,
            followed.run_id,
            followed.events,
            keepalive_s=keepalive,
            headers=headers,
            streams=hub.streams,
            first=first,
        )
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


def _is_json(content_type: str | None) -> bool:
    if content_type is None:
        return False
    if content_type == "application/json":
        return True
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _given(raw: Any) -> Any:
    """No body at all fails as a missing one ("body: Field required"), as FastAPI words it."""
    if raw is None:
        raise HTTPException(422, "body: Field required")
    return raw


def _parse_answer(raw: JsonObject) -> ElicitationResponse:
    return ANSWER_PART.validate(raw, "elicitation-response: ")


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
                jsoncodec.loads(text)
            except jsoncodec.BadNumber as exc:
                raise HTTPException(422, f"messages[-1].content: {exc}.") from None
            return _parse_answer(parsed)
    return text


def _ui_text(message: UIMessage) -> str | ElicitationResponse:
    for part in message.parts:
        if part.get("type") == "elicitation-response":
            return _parse_answer(part)
        if part.get("type") == "data-elicitation-response" and isinstance(part.get("data"), dict):
            return _parse_answer(part["data"])
    return "".join(str(p.get("text", "")) for p in message.parts if p.get("type") == "text")
