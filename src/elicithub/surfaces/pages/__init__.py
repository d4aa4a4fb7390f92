"""The pages the hub hosts for people (sign-in, inbox, admin, the chat widget): where their files are, and how each
is served."""

from __future__ import annotations

from pathlib import Path

from fastapi.responses import FileResponse

WEB_DIR = Path(__file__).resolve().parents[2] / "clients" / "web"

# A page loads only its own files and talks only to its own origin; server text is never markup, and this keeps it
# inert even if a bug ever let some through.
_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def page(name: str) -> FileResponse:
    """One of the pages in WEB_DIR, with the headers every page gets."""
    return FileResponse(WEB_DIR / name, media_type="text/html", headers=_HEADERS)
