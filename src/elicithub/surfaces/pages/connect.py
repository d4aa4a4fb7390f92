"""Hosted auth pages: /auth/connect starts the sign-in a url-mode elicitation links to; /auth/callback finishes it."""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from elicithub.auth.links import BadLink, LinkSigner, LinkTickets
from elicithub.auth.oauth import CLIENT_METADATA_PATH, OAuthClient, OAuthProblem
from elicithub.auth.vault import SignIn, Vault
from elicithub.config import Config
from elicithub.core.elicitation import Elicitation, State, utcnow
from elicithub.errors import IdentityUnavailable
from elicithub.runtime.conversations import Conversations

log = logging.getLogger(__name__)

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


def _browser_tag(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()


def _finished(elicitation: Elicitation) -> HTMLResponse:
    if elicitation.state is State.EXPIRED or elicitation.expires_at <= utcnow():
        return _page(410, "This request has expired", "Ask the assistant again to get a new link.")
    return _page(409, "Already answered", "This sign-in request was already answered; you can close this window.")


class SignInPages:
    """The pages, with what they need handed over by the hub that builds them (the way surfaces get theirs)."""

    def __init__(
        self,
        config: Config,
        conversations: Conversations,
        identity: Callable[[Request], Awaitable[str | None]],
        oauth: OAuthClient,
        vault: Vault,
        links: LinkSigner,
        link_tickets: LinkTickets,
        connected: Callable[[str], None],
    ) -> None:
        """`identity`: the user of a request (raises HTTPException for a bad bearer token); `connected`: hears of each
        account a person connects, by their user id (the tools they may use may change with it)."""
        self.config = config
        self.conversations = conversations
        self.identity = identity
        self.oauth = oauth
        self.vault = vault
        self.links = links
        self.link_tickets = link_tickets
        self.connected = connected
        self.router = APIRouter(include_in_schema=False)
        self.router.add_api_route(CLIENT_METADATA_PATH, self.client_metadata, methods=["GET"])
        self.router.add_api_route("/auth/connect", self.connect, methods=["GET"])
        self.router.add_api_route("/auth/callback", self.callback, methods=["GET"])

    async def _user(self, request: Request) -> str | None:
        try:
            return await self.identity(request)
        except (HTTPException, IdentityUnavailable):
            return None

    async def client_metadata(self) -> Response:
        """The hub's OAuth client ID metadata document: authorization servers that support them fetch it to learn the
        client whose id is this URL (no registration needed)."""
        if self.oauth.client_metadata_url is None:
            return JSONResponse({"error": "not_found"}, status_code=404)
        return JSONResponse(self.oauth.client_metadata(), headers={"cache-control": "public, max-age=300"})

    async def connect(self, request: Request, t: str = "") -> Response:
        try:
            link = self.links.verify(t, self.config.elicitation.timeout_s)
        except BadLink as exc:
            return _page(400, "This link does not work", str(exc))
        user = await self._user(request)
        elicitation = await self.conversations.sign_in_question(link.elicitation_id)
        once = link.once if user is None and elicitation is not None else None  # a single-use link, opened as one
        if once is not None:
            assert elicitation is not None
            user = elicitation.user_id  # if the link was made for them; its ticket is taken below
        if not link.for_user(user, self.links):
            return _page(403, "Not your sign-in link", "This link belongs to another person's conversation.")
        if elicitation is None or elicitation.user_id != user or elicitation.mode != "url":
            return _page(404, "This link does not work", "There is no such sign-in request.")
        if elicitation.state is not State.PENDING or elicitation.expires_at <= utcnow():
            return _finished(elicitation)
        server = self.config.service(str(elicitation.context.get("serverId")))
        if server is None or server.credential_scope != "user":
            return _page(404, "This link does not work", "The service of this sign-in request is not configured.")
        if once is not None and not await self.link_tickets.take(once):
            return _page(403, "This link was already used", "Ask for a new link where you got this one.")
        state = secrets.token_urlsafe(32)
        try:
            scope = elicitation.context.get("scope")  # a step-up asks for more
            authorization = await self.oauth.authorization(
                server, state, scope=scope if isinstance(scope, str) else None
            )
        except OAuthProblem as exc:
            await self.conversations.complete_sign_in(elicitation, connected=False)
            return _page(502, f"Could not connect {server.display_name}", str(exc))
        nonce = secrets.token_urlsafe(32)
        sign_in = SignIn(
            elicitation.id, elicitation.user_id, server.id, authorization.code_verifier, _browser_tag(nonce)
        )
        remaining = (elicitation.expires_at - utcnow()).total_seconds()
        await self.vault.start_sign_in(state, sign_in, ttl_s=max(remaining, 1))
        response = RedirectResponse(authorization.url, status_code=302)
        response.headers["cache-control"] = "no-store"
        response.headers["referrer-policy"] = "no-referrer"
        secure = self.config.public_url.startswith("https://")
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

    async def callback(
        self, request: Request, state: str = "", code: str = "", error: str = "", error_description: str = ""
    ) -> Response:
        if not state:
            return _page(400, "Sign-in failed", "The authorization server sent no state; start again from the chat.")
        sign_in: SignIn | None = await self.vault.take_sign_in(state)
        if sign_in is None:
            return _page(
                400, "Sign-in failed", "This sign-in is unknown or was already used; start again from the chat."
            )
        nonce = request.cookies.get(BROWSER_COOKIE, "")
        if not nonce or not hmac.compare_digest(_browser_tag(nonce), sign_in.browser):
            return _page(
                403, "Sign-in failed", "This sign-in was started in another browser; start again from the chat."
            )
        user = await self._user(request)
        if user is not None and user != sign_in.user_id:
            return _page(403, "Not your sign-in", "This sign-in belongs to another person's conversation.")
        elicitation = await self.conversations.sign_in_question(sign_in.elicitation_id)
        server = self.config.service(sign_in.server_id)
        if elicitation is None or server is None:
            return _page(404, "Sign-in failed", "There is no such sign-in request.")
        if elicitation.state is not State.PENDING or elicitation.expires_at <= utcnow():
            return _finished(elicitation)
        origin = self.config.public_url.rstrip("/")
        if error or not code:
            reason = (
                "you did not allow access" if error == "access_denied" else f"the provider said {error or 'nothing'}"
            )
            outcome = await self.conversations.complete_sign_in(elicitation, connected=False)
            return _page(
                400,
                f"{server.display_name} was not connected",
                f"Sign-in was not completed: {reason}. You can close this window.",
                {"type": COMPLETE_MESSAGE, "elicitationId": elicitation.id, "outcome": outcome},
                origin,
            )
        try:
            credential = await self.oauth.exchange(server, code, sign_in.code_verifier)
        except OAuthProblem as exc:
            outcome = await self.conversations.complete_sign_in(elicitation, connected=False)
            return _page(
                502,
                f"{server.display_name} was not connected",
                str(exc),
                {"type": COMPLETE_MESSAGE, "elicitationId": elicitation.id, "outcome": outcome},
                origin,
            )
        # Store first, then resolve: the woken tool call reads the credential straight away.
        await self.vault.save_credential(server.id, sign_in.user_id, credential)
        log.info("user connected %s for elicitation %s", server.id, elicitation.id)
        outcome = await self.conversations.complete_sign_in(elicitation, connected=True)
        self.connected(sign_in.user_id)
        return _page(
            200,
            f"Connected {server.display_name}",
            "Connected — you can close this window.",
            {"type": COMPLETE_MESSAGE, "elicitationId": elicitation.id, "outcome": outcome},
            origin,
        )
