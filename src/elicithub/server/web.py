"""The web widget: its page (where the demo signs a browser in) and static files, and the reads the page needs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.staticfiles import StaticFiles

from elicithub.core.events import request_event
from elicithub.core.runs import Message
from elicithub.demo.launcher import SUGGESTIONS
from elicithub.server.chat_routes import caller_of
from elicithub.server.hub import Hub
from elicithub.server.routes import ConversationIdPath
from elicithub.surfaces.pages import WEB_DIR, page
from elicithub.surfaces.responses import errors

STATIC_PATH = "/static"


def static_files() -> StaticFiles:
    return StaticFiles(directory=WEB_DIR)


def widget_routes(hub: Hub) -> APIRouter:
    """The page and the reads it makes, of `hub`."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def index(request: Request) -> Response:
        return await page("index.html", request, hub.dev_sign_in)

    @router.get("/run/api/me", responses=errors(401))
    async def me(request: Request) -> dict[str, str | None]:
        """Who the page is signed in as (`name`: as the provider names them); `signIn` when no one and the hub
        signs people in at its identity provider."""
        if "authorization" in request.headers:
            return {"user": await hub.identity.of(request)}
        session = await hub.identity.session(request)
        if session is not None:
            return {"user": session.user_id, **({"name": session.name} if session.name else {})}
        oidc = hub.config.auth.oidc
        sign_in = {"signIn": hub.config.public_url.rstrip("/") + "/auth/sign-in"} if oidc and oidc.client_id else {}
        return {"user": None, **sign_in}

    @router.get("/run/api/suggestions")
    async def suggestions() -> dict[str, list[dict[str, str]]]:
        """Messages the page offers to send with one click (`label`, `message`): the demo's calls while the demo is
        on, else none."""
        return {"suggestions": SUGGESTIONS if hub.config.demo.enabled else []}

    @router.get("/run/api/conversations/{conversation_id}", responses=errors(400, 401, 404, 422))
    async def conversation(request: Request, conversation_id: ConversationIdPath) -> dict[str, Any]:
        """The transcript and the still-open questions, so a reloaded page can pick up where it was."""
        caller = await caller_of(hub, request)
        found = await hub.conversations.get(caller, conversation_id)
        pending = await hub.conversations.pending(caller, conversation_id)
        return {
            "id": found.id,
            "messages": [shown for m in found.messages if (shown := _shown(m)) is not None],
            "pending": [request_event(e) for e in pending],
        }

    return router


def _shown(message: Message) -> dict[str, str] | None:
    """A chat message as the transcript shows it: user and assistant text only (tool steps are in the text)."""
    role, content = message.get("role"), message.get("content")
    if role not in ("user", "assistant"):
        return None
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    if not isinstance(content, str) or not content:
        return None
    return {"role": role, "text": content}
