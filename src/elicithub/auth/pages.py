"""Hosted auth pages: /auth/connect starts the sign-in a url-mode elicitation links to; /auth/callback finishes it."""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import secrets
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from elicithub.auth.links import BadLink
from elicithub.auth.oauth import CLIENT_METADATA_PATH, OAuthProblem
from elicithub.auth.vault import SignIn
from elicithub.core.elicitation import Answer, Elicitation, State, utcnow
from elicithub.errors import HubError

log = logging.getLogger(__name__)

router = APIRouter(include_in_schema=False)

BROWSER_COOKIE = "elicithub_signin"
COMPLETE_MESSAGE = "elicithub:auth-complete"


def _page(status: int, title: str, text: str, notify: dict[str, Any] | None = None, origin: str = "") -> HTMLResponse:
    script = ""
    if notify is not None:
        # JSON inside a script: escape "<" so no value can close the tag.
        payload = json.dumps(notify).replace("<", "\\u003c")
        target = json.dumps(origin).replace("<", "\\u003c")
        script = f"<script>if (window.opener) {{ window.opener.postMessage({payload}, {target}); }}</script>"
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1f2328}}
h1{{font-size:1.4rem}}</style></head>
<body><main><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></main>{script}</body></html>"""
    headers = {
        "cache-control": "no-store",
        "referrer-policy": "no-referrer",
        "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'",
    }
    return HTMLResponse(body, status_code=status, headers=headers)


def _identity(request: Request) -> str | None:
    try:
        user: str | None = request.app.state.hub.identity(request)
    except HTTPException:
        return None
    return user


def _browser_tag(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()


def _finished(elicitation: Elicitation) -> HTMLResponse:
    if elicitation.state is State.EXPIRED or elicitation.expires_at <= utcnow():
        return _page(410, "This request has expired", "Ask the assistant again to get a new link.")
    return _page(409, "Already answered", "This sign-in request was already answered; you can close this window.")


@router.get(CLIENT_METADATA_PATH)
async def client_metadata(request: Request) -> Response:
    """The hub's OAuth client ID metadata document: authorization servers that support them fetch it to learn the
    client whose id is this URL (no registration needed)."""
    oauth = request.app.state.hub.oauth
    if oauth.client_metadata_url is None:
        return JSONResponse({"error": "not_found"}, status_code=404)
    return JSONResponse(oauth.client_metadata(), headers={"cache-control": "public, max-age=300"})


@router.get("/auth/connect")
async def connect(request: Request, t: str = "") -> Response:
    hub = request.app.state.hub
    try:
        link = hub.links.verify(t, hub.config.elicitation.timeout_s)
    except BadLink as exc:
        return _page(400, "This link does not work", str(exc))
    user = _identity(request)
    elicitation = await hub.store.get(link.elicitation_id)
    single_use = user is None and link.once is not None and elicitation is not None
    if single_use:
        assert elicitation is not None
        user = elicitation.user_id  # if the link was made for them; its ticket is taken below
    if not link.for_user(user, hub.links):
        return _page(403, "Not your sign-in link", "This link belongs to another person's conversation.")
    if elicitation is None or elicitation.user_id != user or elicitation.mode != "url":
        return _page(404, "This link does not work", "There is no such sign-in request.")
    if elicitation.state is not State.PENDING or elicitation.expires_at <= utcnow():
        return _finished(elicitation)
    server = hub.config.service(str(elicitation.context.get("serverId")))
    if server is None or server.credential_scope != "user":
        return _page(404, "This link does not work", "The service of this sign-in request is not configured.")
    if single_use and not await hub.link_tickets.take(link.once):
        return _page(403, "This link was already used", "Ask for a new link where you got this one.")
    state = secrets.token_urlsafe(32)
    try:
        scope = elicitation.context.get("scope")  # a step-up asks for more
        authorization = await hub.oauth.authorization(server, state, scope=scope if isinstance(scope, str) else None)
    except OAuthProblem as exc:
        await _settle(request, elicitation, "decline")
        return _page(502, f"Could not connect {server.display_name}", str(exc))
    nonce = secrets.token_urlsafe(32)
    sign_in = SignIn(elicitation.id, elicitation.user_id, server.id, authorization.code_verifier, _browser_tag(nonce))
    remaining = (elicitation.expires_at - utcnow()).total_seconds()
    await hub.vault.start_sign_in(state, sign_in, ttl_s=max(remaining, 1))
    response = RedirectResponse(authorization.url, status_code=302)
    response.headers["cache-control"] = "no-store"
    response.headers["referrer-policy"] = "no-referrer"
    secure = hub.config.public_url.startswith("https://")
    response.set_cookie(
        BROWSER_COOKIE,
        nonce,
        max_age=int(remaining) + 1,
        path="/auth/callback",
        httponly=True,
        samesite="lax",
        secure=secure,
    )
    return response


@router.get("/auth/callback")
async def callback(
    request: Request, state: str = "", code: str = "", error: str = "", error_description: str = ""
) -> Response:
    hub = request.app.state.hub
    if not state:
        return _page(400, "Sign-in failed", "The authorization server sent no state; start again from the chat.")
    sign_in: SignIn | None = await hub.vault.take_sign_in(state)
    if sign_in is None:
        return _page(400, "Sign-in failed", "This sign-in is unknown or was already used; start again from the chat.")
    nonce = request.cookies.get(BROWSER_COOKIE, "")
    if not nonce or not hmac.compare_digest(_browser_tag(nonce), sign_in.browser):
        return _page(403, "Sign-in failed", "This sign-in was started in another browser; start again from the chat.")
    user = _identity(request)
    if user is not None and user != sign_in.user_id:
        return _page(403, "Not your sign-in", "This sign-in belongs to another person's conversation.")
    elicitation = await hub.store.get(sign_in.elicitation_id)
    server = hub.config.service(sign_in.server_id)
    if elicitation is None or server is None:
        return _page(404, "Sign-in failed", "There is no such sign-in request.")
    if elicitation.state is not State.PENDING or elicitation.expires_at <= utcnow():
        return _finished(elicitation)
    origin = hub.config.public_url.rstrip("/")
    if error or not code:
        reason = "you did not allow access" if error == "access_denied" else f"the provider said {error or 'nothing'}"
        outcome = await _settle(request, elicitation, "decline")
        return _page(
            400,
            f"{server.display_name} was not connected",
            f"Sign-in was not completed: {reason}. You can close this window.",
            {"type": COMPLETE_MESSAGE, "elicitationId": elicitation.id, "outcome": outcome},
            origin,
        )
    try:
        credential = await hub.oauth.exchange(server, code, sign_in.code_verifier)
    except OAuthProblem as exc:
        outcome = await _settle(request, elicitation, "decline")
        return _page(
            502,
            f"{server.display_name} was not connected",
            str(exc),
            {"type": COMPLETE_MESSAGE, "elicitationId": elicitation.id, "outcome": outcome},
            origin,
        )
    # Store first, then resolve: the woken tool call reads the credential straight away.
    await hub.vault.save_credential(server.id, sign_in.user_id, credential)
    log.info("user connected %s for elicitation %s", server.id, elicitation.id)
    outcome = await _settle(request, elicitation, "accept")
    return _page(
        200,
        f"Connected {server.display_name}",
        "Connected — you can close this window.",
        {"type": COMPLETE_MESSAGE, "elicitationId": elicitation.id, "outcome": outcome},
        origin,
    )


async def _settle(request: Request, elicitation: Elicitation, action: str) -> str:
    """Resolve the elicitation for its user; the outcome it ends with (someone may have answered first)."""
    hub = request.app.state.hub
    try:
        resolution = await hub.broker.respond(elicitation.id, Answer(action), elicitation.user_id)  # type: ignore[arg-type]
    except HubError:
        current = await hub.store.get(elicitation.id)
        return current.outcome if current is not None and current.outcome else "expired"
    return str(resolution.outcome)
