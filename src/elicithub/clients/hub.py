"""The hub from Python (async, httpx): chat and read typed events, answer questions, follow a conversation.

The events are the hub's own where they are the same (`Text`, `Reasoning`, `ModelStatus`, `ToolCall`,
`ElicitationResolved`); the others carry what the stream gives a client (a tool's output, the conversation a question
belongs to, the raw event). A model's text comes piece by piece as the model writes it, and so does its thinking
(`Reasoning`, apart from the answer); `ModelStatus` says its request is being retried.

async with HubClient("http://127.0.0.1:8700", token="alice-secret") as hub:
    async for event in hub.chat('/call deploy.deploy_service {"service": "orders"}'):
        if isinstance(event, ElicitationRequest):
            await hub.answer(event.elicitation_id, "accept", {"region": "eu-west-1", "confirm": True})
        elif isinstance(event, Text):
            print(event.text, end="")
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx

from elicithub.core.elicitation import Outcome, QuestionContext, State
from elicithub.core.events import AnswerEvent, ElicitationResolved, ModelStatus
from elicithub.core.events import ReasoningDelta as Reasoning
from elicithub.core.events import TextDelta as Text
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import ToolCall
from elicithub.core.schema import FieldError
from elicithub.errors import (
    AlreadyResolved,
    BadRequest,
    ConversationNotFound,
    ElicitationNotFound,
    Expired,
    HubError,
    HubUnreachable,
    InvalidContent,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
)

__all__ = [
    "ElicitationRequest",
    "ElicitationResolved",
    "Event",
    "HubClient",
    "ModelStatus",
    "RawEvent",
    "Reasoning",
    "Text",
    "ToolCall",
    "ToolResult",
]

DEFAULT_URL = "http://127.0.0.1:8700"
TOKEN_ENV = "ELICITHUB_TOKEN"
"""Where `HubClient` and `elicithub chat` find the bearer token when none is given."""


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    output: Any
    is_error: bool = False


@dataclass(frozen=True)
class ElicitationRequest:
    """A question for the person: the hub's `elicitation-request` event (see `elicithub.core.events.RequestEvent`)
    and the conversation it belongs to; `raw` is the event as the hub sent it."""

    elicitation_id: str
    mode: str
    message: str
    conversation_id: str
    requested_schema: JsonObject | None = None
    url: str | None = None
    context: QuestionContext = field(default_factory=QuestionContext)
    expires_at: str | None = None
    raw: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class RawEvent:
    """Any other part of the stream (start, finish, steps, a call's arguments as the model writes them, types newer
    than this client), passed through as sent."""

    data: JsonObject


Event = Text | Reasoning | ModelStatus | ToolCall | ToolResult | ElicitationRequest | ElicitationResolved | RawEvent


class HubClient:
    """One person's connection to a hub; it says it can show questions (`x-supports-elicitation: true`).

    `token`: a user's bearer token, or a JWT from the hub's identity provider; `$ELICITHUB_TOKEN` when not given."""

    def __init__(
        self, url: str = DEFAULT_URL, *, token: str | None = None, http: httpx.AsyncClient | None = None
    ) -> None:
        headers = {"x-supports-elicitation": "true"}
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        if token:
            headers["authorization"] = f"Bearer {token}"
        # No read timeout: a stream waits as long as the person takes (the hub sends keep-alives meanwhile).
        self._http = http or httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))
        self._own_http = http is None
        self._base = url.rstrip("/")
        self._headers = headers
        self._conversations: dict[str, str] = {}
        self.conversation_id: str | None = None
        """The conversation of the last chat or follow."""

    async def __aenter__(self) -> HubClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def chat(self, message: str, conversation_id: str | None = None) -> AsyncIterator[Event]:
        """Send a message and read the run it starts, to its end (questions included: answer them meanwhile).
        Without `conversation_id` it goes on with this client's last conversation, or starts a new one."""
        conversation = conversation_id or self.conversation_id or f"conv-{secrets.token_urlsafe(12)}"
        body = {
            "id": conversation,
            "messages": [
                {"id": f"msg-{secrets.token_urlsafe(9)}", "role": "user", "parts": [{"type": "text", "text": message}]}
            ],
        }
        request = self._http.build_request("POST", f"{self._base}/run/api/chat", json=body, headers=self._headers)
        async for event in self._events(request, conversation):
            yield event

    async def follow(self, conversation_id: str) -> AsyncIterator[Event]:
        """The conversation's active run, from its start; nothing when no run is active."""
        url = f"{self._base}/run/api/conversations/{conversation_id}/stream"
        async for event in self._events(self._http.build_request("GET", url, headers=self._headers), conversation_id):
            yield event

    async def answer(
        self,
        elicitation_id: str,
        action: str,
        content: JsonObject | None = None,
        *,
        conversation_id: str | None = None,
    ) -> str:
        """Answer a question; returns its outcome. Raises InvalidContent (one error per field) when the content
        does not fit, and the question stays open."""
        conversation = conversation_id or self._conversations.get(elicitation_id) or self.conversation_id
        body: AnswerEvent = {"conversationId": conversation, "elicitationId": elicitation_id, "action": action}
        if content is not None:
            body["content"] = content
        try:
            response = await self._http.post(
                f"{self._base}/run/api/elicitation-responses", json=body, headers=self._headers
            )
        except httpx.HTTPError as exc:
            raise HubUnreachable(f"cannot reach the hub at {self._base}: {exc}") from exc
        if response.status_code != 200:
            raise _error(response.status_code, _body(response.content), elicitation_id=elicitation_id)
        return str(response.json()["outcome"])

    async def _events(self, request: httpx.Request, conversation: str) -> AsyncIterator[Event]:
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise HubUnreachable(f"cannot reach the hub at {self._base}: {exc}") from exc
        try:
            if response.status_code == 204:
                return
            if response.status_code != 200:
                raise _error(response.status_code, _body(await response.aread()), conversation_id=conversation)
            conversation = response.headers.get("x-conversation-id", conversation)
            self.conversation_id = conversation
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue  # ids, keep-alive comments and blank lines, by the SSE rules
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return
                event = _event(json.loads(payload), conversation)
                if isinstance(event, ElicitationRequest):
                    self._conversations[event.elicitation_id] = conversation
                yield event
        except httpx.HTTPError as exc:
            raise HubUnreachable(f"the stream from {self._base} broke off: {exc}") from exc
        finally:
            await response.aclose()


def _event(part: JsonObject, conversation: str) -> Event:
    kind, data = part.get("type"), part.get("data")
    if kind == "text-delta":
        return Text(str(part.get("delta", "")))
    if kind == "reasoning-delta":
        return Reasoning(str(part.get("delta", "")))
    if kind == "data-model-status" and isinstance(data, dict):
        return ModelStatus(str(data.get("message", "")))
    if kind == "tool-input-available" and isinstance(arguments := part.get("input"), dict):
        return ToolCall(str(part.get("toolCallId")), str(part.get("toolName")), arguments)
    if kind == "tool-output-available":
        return ToolResult(str(part.get("toolCallId")), part.get("output"))
    if kind == "tool-output-error":
        return ToolResult(str(part.get("toolCallId")), part.get("errorText"), is_error=True)
    if kind == "data-elicitation-request" and isinstance(data, dict):
        return ElicitationRequest(
            elicitation_id=str(data.get("elicitationId")),
            mode=str(data.get("mode")),
            message=str(data.get("message", "")),
            conversation_id=conversation,
            requested_schema=data.get("requestedSchema"),
            url=data.get("url"),
            context=data.get("context") or {},
            expires_at=data.get("expiresAt"),
            raw=data,
        )
    if kind == "data-elicitation-resolved" and isinstance(data, dict) and (outcome := _outcome(data)) is not None:
        by = data.get("answeredBy")
        return ElicitationResolved(str(data.get("elicitationId")), outcome, by if isinstance(by, str) else None)
    return RawEvent(part)


def _outcome(data: JsonObject) -> Outcome | None:
    """The outcome an `elicitation-resolved` event names; None for a word this client does not know."""
    try:
        return State(str(data.get("outcome"))).outcome
    except (ValueError, KeyError):
        return None


def _body(content: bytes) -> JsonObject:
    try:
        data = json.loads(content)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _error(
    status: int, body: JsonObject, *, elicitation_id: str | None = None, conversation_id: str | None = None
) -> HubError:
    """The hub's JSON error as the package's own exception."""
    found = body.get("error")
    error: JsonObject = found if isinstance(found, dict) else {}
    message = str(error.get("message") or f"the hub answered HTTP {status}")
    if elicitation_id is not None:
        if status == 404:
            return ElicitationNotFound(elicitation_id)
        if status == 409:
            return AlreadyResolved(elicitation_id, "resolved")
        if status == 410:
            return Expired(elicitation_id)
        if status == 422 and isinstance(error.get("fields"), list):
            fields = [FieldError(str(f.get("field", "")), str(f.get("message", ""))) for f in error["fields"]]
            return InvalidContent(elicitation_id, fields)
    if status == 404 and conversation_id is not None and error.get("code") == "not_found":
        return ConversationNotFound(conversation_id)
    kind = {400: BadRequest, 401: Unauthorized, 404: NotFound, 413: PayloadTooLarge, 422: BadRequest}.get(
        status, HubError
    )
    return kind(message)
