"""The pages the hub hosts for people (sign-in, inbox, admin, the chat widget): where their files are, and how each
is served."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import Request, Response
from fastapi.responses import FileResponse

WEB_DIR = Path(__file__).resolve().parents[2] / "clients" / "web"

# A page loads only its own files and talks only to its own origin; server text is never markup, and this keeps it
# inert even if a bug ever let some through.
PAGE_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


Welcome = Callable[[Request, Response], Awaitable[None]]
"""What the hub does for a browser that opens one of its pages, with the response (the demo signs it in as its dev
user: server/dev_sign_in.py)."""


async def page(name: str, request: Request, welcome: Welcome) -> FileResponse:
    """One of the pages in WEB_DIR, with the headers every page gets, for the browser `welcome` has seen to."""
    response = FileResponse(WEB_DIR / name, media_type="text/html", headers=PAGE_HEADERS)
    await welcome(request, response)
    return response
