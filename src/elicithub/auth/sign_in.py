"""The widget's sign-in with the company's OpenID provider: authorization code with PKCE, `state` and `nonce`
(authlib), ending in the hub's own HTTP-only session cookie; the page never holds a token. Sign-out ends it."""

from __future__ import annotations

import hmac
import html
import secrets
from typing import TYPE_CHECKING, Any

from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.integrations.httpx_client import OAuthError as AuthlibOAuthError
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from elicithub.errors import IdentityUnavailable

if TYPE_CHECKING:
    from elicithub.server.hub import Hub

router = APIRouter(include_in_schema=False)

CALLBACK_PATH = "/auth/signed-in"
"""The redirect URI to register at the provider: PUBLIC_URL + this."""

PENDING_COOKIE = "elicithub_oidc"
PENDING_MAX_AGE_S = 600
"""How long a person may take at the provider's page."""


@router.get("/auth/sign-in")
async def sign_in(request: Request) -> Response:
    hub: Hub = request.app.state.hub
    oidc = hub.config.auth.oidc
    if hub.oidc is None or oidc is None or oidc.client_id is None:
        return _page(404, "No sign-in here", "This hub has no identity provider for people to sign in with.")
    try:
        metadata = await hub.oidc.discover()
    except IdentityUnavailable as exc:
        return _page(503, "Cannot sign in now", str(exc))
    pending = {"state": secrets.token_urlsafe(32), "verifier": secrets.token_urlsafe(48)}
    pending["nonce"] = secrets.token_urlsafe(32)
    async with _client(hub) as client:
        url, _ = client.create_authorization_url(
            metadata["authorization_endpoint"],
            state=pending["state"],
            code_verifier=pending["verifier"],
            nonce=pending["nonce"],
        )
    response = RedirectResponse(url, status_code=302, headers={"cache-control": "no-store"})
    response.set_cookie(
        PENDING_COOKIE,
        _pending(hub).dumps(pending),
        max_age=PENDING_MAX_AGE_S,
        path=CALLBACK_PATH,
        httponly=True,
        samesite="lax",
        secure=_secure(hub),
    )
    return response


@router.get(CALLBACK_PATH)
async def signed_in(request: Request, code: str = "", state: str = "", error: str = "") -> Response:
    hub: Hub = request.app.state.hub
    if hub.oidc is None:
        return _page(404, "No sign-in here", "This hub has no identity provider for people to sign in with.")
    again = '<p><a href="/auth/sign-in">Sign in again</a></p>'
    if error:
        return _page(400, "Not signed in", f"The identity provider said: {error}.", again)
    try:
        pending = _pending(hub).loads(request.cookies.get(PENDING_COOKIE, ""), max_age=PENDING_MAX_AGE_S)
    except BadSignature:
        pending = None
    if not isinstance(pending, dict) or not hmac.compare_digest(str(pending.get("state")), state) or not code:
        return _page(400, "Not signed in", "This sign-in was started elsewhere or took too long.", again)
    try:
        metadata = await hub.oidc.discover()
        async with _client(hub) as client:
            token = await client.fetch_token(metadata["token_endpoint"], code=code, code_verifier=pending["verifier"])
        user = await hub.oidc.signed_in_user(str(token.get("id_token", "")), pending["nonce"])
    except IdentityUnavailable as exc:
        return _page(503, "Cannot sign in now", str(exc), again)
    except AuthlibOAuthError as exc:
        return _page(502, "Not signed in", f"The identity provider refused the sign-in ({exc.error}).", again)
    if user is None:
        return _page(401, "Not signed in", "The identity provider's answer could not be verified.", again)
    response = RedirectResponse("/", status_code=302, headers={"cache-control": "no-store"})
    response.delete_cookie(PENDING_COOKIE, path=CALLBACK_PATH)
    hub.identity.start_session(response, user, secure=_secure(hub))
    return response


@router.get("/auth/session")
async def session(request: Request) -> Response:
    """Who this browser is signed in as, with the way out (or in)."""
    hub: Hub = request.app.state.hub
    user = hub.identity.session_user(request)
    if user is None:
        link = '<p><a href="/auth/sign-in">Sign in</a></p>' if hub.config.auth.oidc is not None else ""
        return _page(200, "Not signed in", "This browser is not signed in to the hub.", link)
    form = '<form method="post" action="/auth/sign-out"><button type="submit">Sign out</button></form>'
    return _page(200, "Signed in", f"Signed in as {user}.", form)


@router.post("/auth/sign-out")
async def sign_out(request: Request) -> Response:
    response = RedirectResponse("/auth/session", status_code=303, headers={"cache-control": "no-store"})
    hub: Hub = request.app.state.hub
    hub.identity.end_session(response)
    return response


def _client(hub: Hub) -> AsyncOAuth2Client:
    oidc = hub.config.auth.oidc
    assert oidc is not None
    secret = hub.oidc_client_secret
    return AsyncOAuth2Client(
        client_id=oidc.client_id,
        client_secret=secret,
        scope=" ".join(oidc.scopes),
        redirect_uri=hub.config.public_url.rstrip("/") + CALLBACK_PATH,
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_post" if secret else "none",
        timeout=10,
    )


def _pending(hub: Hub) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(hub.keys.derive("oidc-sign-in"), salt="elicithub-oidc-sign-in")


def _secure(hub: Hub) -> bool:
    return hub.config.public_url.startswith("https://")


def _page(status: int, title: str, text: str, trusted_html: str = "") -> HTMLResponse:
    """A small page; `text` is escaped, `trusted_html` is the page's own link or form."""
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}}</style></head>
<body><main><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>{trusted_html}</main></body></html>"""
    headers: dict[str, Any] = {
        "cache-control": "no-store",
        "referrer-policy": "no-referrer",
        "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
    }
    return HTMLResponse(body, status_code=status, headers=headers)
