"""A person's inbox: the open questions they can answer (`GET /run/api/inbox`), the stream of their comings and
goings (`GET /run/api/inbox/stream`), and the page `/inbox` that lists and answers them."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Header, HTTPException, Request, Response
from pydantic import BaseModel

from elicithub.core.jsoncodec import dumps_event
from elicithub.runtime.approvers import Answerable
from elicithub.runtime.inbox import Inbox, InboxEvent, item
from elicithub.surfaces.pages import Welcome, page
from elicithub.surfaces.responses import ErrorBody, EventStream, stream
from elicithub.surfaces.streaming import OpenStreams, SSEResponse


class WhoAsks(Protocol):
    """Who makes a request (the hub's `Identity`): a bearer token's user, or the session cookie's."""

    async def of(self, request: Request) -> str | None: ...

    def challenge(self, path: str = "", *, invalid_token: bool) -> str: ...


GroupsOf = Callable[[Request, str], Awaitable[frozenset[str]]]
"""The groups the identity provider puts the person making a request in (`Hub.groups_of`)."""

LastEventId = Annotated[
    str | None,
    Header(description="The `id` of the last event read; another value (or none) starts over with `inbox-reset`."),
]


class InboxItem(BaseModel):
    """An open question the person can answer: `conversationId` only for their own runs' questions; a form question
    has `requestedSchema`, a url one `url`; an approval's `context` names the `requester`, the tool (`serverId`,
    `toolName`) and its `arguments`."""

    elicitationId: str
    conversationId: str | None = None
    message: str
    mode: Literal["form", "url"]
    requestedSchema: dict[str, Any] | None = None
    url: str | None = None
    context: dict[str, Any]
    createdAt: str
    expiresAt: str


class InboxList(BaseModel):
    questions: list[InboxItem]


_STREAM = (
    "`inbox-added` (an item, as the list has it), `inbox-removed` (`elicitationId`, `outcome`, `answeredBy` when "
    "someone answered), each with an `id` for `Last-Event-ID`; a stream that cannot resume starts with `inbox-reset` "
    "(forget what you show) and every open question as `inbox-added`."
)


class InboxPages:
    """The routes, with what they need handed over by the hub that builds them."""

    def __init__(
        self,
        inbox: Inbox,
        answerable: Answerable,
        identity: WhoAsks,
        groups_of: GroupsOf,
        streams: OpenStreams,
        keepalive_s: float,
        welcome: Welcome,
    ) -> None:
        self.inbox = inbox
        self.answerable = answerable
        self.identity = identity
        self.groups_of = groups_of
        self.streams = streams
        self.keepalive_s = keepalive_s
        self.welcome = welcome
        self.router = APIRouter()
        why = "No one is signed in, or a bearer token names no user."
        refused: dict[int | str, dict[str, Any]] = {401: {"model": ErrorBody, "description": why}}
        self.router.add_api_route(
            "/run/api/inbox",
            self.listed,
            methods=["GET"],
            response_model=InboxList,
            response_model_exclude_unset=True,
            responses=refused,
        )
        self.router.add_api_route(
            "/run/api/inbox/stream",
            self.stream,
            methods=["GET"],
            response_class=EventStream,
            responses=stream(_STREAM, 401),
        )
        self.router.add_api_route("/inbox", self.page, methods=["GET"], include_in_schema=False)

    async def _person(self, request: Request) -> tuple[str, frozenset[str]]:
        """Who asks, and every group they are in (their identity provider's and the hub's `groups:`); 401 if no one."""
        user = await self.identity.of(request)
        if user is None:
            challenge = self.identity.challenge(invalid_token=False)
            raise HTTPException(401, "Sign in to see your inbox.", headers={"WWW-Authenticate": challenge})
        return user, self.answerable.of(user, await self.groups_of(request, user))

    async def listed(self, request: Request) -> InboxList:
        """The open questions you can answer, newest first: your own runs' and the approvals routed to you."""
        user, groups = await self._person(request)
        found = await self.answerable.questions(user, groups)
        return InboxList(questions=[InboxItem.model_validate(item(e, user)) for e in found])

    async def stream(self, request: Request, last_event_id: LastEventId = None) -> Response:
        """Your inbox as it changes, from any hub: what you missed after `Last-Event-ID`, then live."""
        user, groups = await self._person(request)
        events = self.inbox.follow(user, groups, last_event_id, lambda: self.answerable.questions(user, groups))
        return SSEResponse(_frames(events), keepalive_s=self.keepalive_s, headers={}, streams=self.streams)

    async def page(self, request: Request) -> Response:
        """The page: anyone may load it; what it shows comes from the API, for whoever is signed in."""
        return await page("inbox.html", request, self.welcome)


async def _frames(events: AsyncIterator[tuple[int | None, InboxEvent]]) -> AsyncGenerator[tuple[bytes, bool], None]:
    try:
        async for position, event in events:
            head = "" if position is None else f"id: {position}\r\n"
            yield f"{head}data: {dumps_event(event)}\r\n\r\n".encode(), False
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
