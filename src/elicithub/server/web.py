"""The web widget: its page and static files, the demo session cookie, and the reads the page needs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.staticfiles import StaticFiles

from elicithub.core.events import request_event
from elicithub.core.runs import Message
from elicithub.server.openapi import errors
from elicithub.server.routes import CallerDep, ConversationIdPath, HubDep, UserDep
from elicithub.surfaces.pages import WEB_DIR, page

STATIC_PATH = "/static"

router = APIRouter()


def static_files() -> StaticFiles:
    return StaticFiles(directory=WEB_DIR)


@router.get("/", include_in_schema=False)
async def index(request: Request, hub: HubDep) -> Response:
    response = page("index.html")
    demo = hub.config.demo
    if demo.enabled and "authorization" not in request.headers and hub.identity.session_user(request) is None:
        secure = hub.config.public_url.startswith("https://") or request.url.scheme == "https"
        hub.identity.start_session(response, demo.dev_user, secure=secure)
    return response


@router.get("/run/api/me", responses=errors(401))
async def me(user: UserDep) -> dict[str, str | None]:
    return {"user": user}


@router.get("/run/api/conversations/{conversation_id}", responses=errors(400, 401, 404, 422))
async def conversation(conversation_id: ConversationIdPath, hub: HubDep, caller: CallerDep) -> dict[str, Any]:
    """The transcript and the still-open questions, so a reloaded page can pick up where it was."""
    found = await hub.conversations.get(caller, conversation_id)
    pending = await hub.conversations.pending(caller, conversation_id)
    return {
        "id": found.id,
        "messages": [shown for m in found.messages if (shown := _shown(m)) is not None],
        "pending": [request_event(e) for e in pending],
    }


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
