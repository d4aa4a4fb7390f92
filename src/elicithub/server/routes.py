"""HTTP routes FastAPI serves: health, and reading a conversation's stream again. The chat and answer endpoints are
served ahead of FastAPI (server/chat_routes.py) and documented here."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Request, Response

from elicithub.server import openapi
from elicithub.server.chat_routes import caller_of
from elicithub.server.hub import Hub
from elicithub.surfaces.bodies import ID
from elicithub.surfaces.chat.ui_stream import HEADERS as UI_HEADERS
from elicithub.surfaces.chat.ui_stream import UIMessageStreamWriter
from elicithub.surfaces.responses import EventStream, stream
from elicithub.surfaces.streaming import parse_event_id, sse

ConversationIdPath = Annotated[str, Path(description="The conversation.", json_schema_extra=ID)]
LastEventId = Annotated[
    str | None, Header(description="`RUN:SEQ` of the last event read; any other value reads from the start.")
]

_REATTACH: dict[str, Any] = {
    "response_class": EventStream,
    "responses": {
        **stream("The run after `Last-Event-ID`, or the active run, as a UI message stream.", 400, 401, 404, 422),
        204: {"description": "Nothing follows `Last-Event-ID`, and no run is active in this conversation."},
    },
}


def hub_routes(hub: Hub) -> APIRouter:
    """The routes of `hub`, handed to them here: the app that serves them holds nothing for them."""
    router = APIRouter()

    @router.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {
            "status": "ok",
            "instance": hub.instance,
            "pendingElicitations": hub.broker.pending_here(),
            "openStreams": hub.conversations.readers("chat"),
            "reattachedStreams": hub.conversations.readers("reattached"),
            "runs": hub.conversations.running(),
        }

    router.include_router(openapi.wire_routes)

    @router.get("/run/api/conversations/{conversation_id}/stream", **_REATTACH)
    @router.get("/run/api/chat/{conversation_id}/stream", **_REATTACH)
    async def reattach(
        request: Request, conversation_id: ConversationIdPath, last_event_id: LastEventId = None
    ) -> Response:
        """Read a run again (UI message stream): after `Last-Event-ID` the rest of the run it names, through its
        end even when that came meanwhile; else the active run from its start; 204 when neither has anything."""
        caller = await caller_of(hub, request)
        resume = parse_event_id(last_event_id)
        at = None if resume is None else (resume.run_id, resume.seq)
        followed = await hub.conversations.reattach(
            caller, conversation_id, at, (0, 0) if resume is None else resume.read
        )
        if followed is None:
            return Response(status_code=204)
        headers = {**UI_HEADERS, "x-conversation-id": conversation_id}
        writer = UIMessageStreamWriter(followed.run_id)
        if hub.config.ui_stream.native_approvals:
            # Read again, a pause on approvals answered since is passed over (what came after it follows).
            still_open = [e.id for e in await hub.conversations.pending(caller, conversation_id)]
            writer = UIMessageStreamWriter(followed.run_id, native_approvals=True, still_open=still_open)
        keepalive = hub.config.streams.keepalive_s
        return sse(
            writer, followed.run_id, followed.events, keepalive_s=keepalive, headers=headers, streams=hub.streams
        )

    return router
