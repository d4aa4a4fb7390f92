"""The widget's sign-in with the company's OpenID provider: authorization code with PKCE, `state` and `nonce`
(authlib), ending in the hub's own HTTP-only session cookie; the page never holds a token. Sign-out ends it."""

from __future__ import annotations

import hmac
import html
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from elicithub.auth.addresses import SignedInAddresses
from elicithub.auth.groups import SignedInGroups
from elicithub.auth.sessions import CALLBACK_PATH, Session, widget_client
from elicithub.config import OidcConfig
from elicithub.errors import IdentityUnavailable

if TYPE_CHECKING:  # a hub without a provider does without them (authlib, joserfc, httpx)
    from authlib.integrations.httpx_client import AsyncOAuth2Client

    from elicithub.auth.oidc import OidcVerifier, Person


class BrowserSessions(Protocol):
    """The browser sessions of the hub's identity, which a sign-in starts and a sign-out ends."""

    async def start_provider_session(
        self, response: Response, person: Person, token: Mapping[str, Any], *, secure: bool
    ) -> None: ...

    async def end_session(self, request: Request, response: Response) -> None: ...

    async def session(self, request: Request) -> Session | None: ...


PENDING_COOKIE = "elicithub_oidc"
PENDING_MAX_AGE_S = 600
"""How long a person may take at the provider's page."""


class ProviderSignIn:
    """The sign-in pages, with what they need handed over by the hub that builds them (as the other pages get
    theirs): the provider's settings and verifier (None when the hub has no provider), the identity whose session
    they start and end, the key that seals a sign-in in progress, the client secret if any, and where the groups
    (and, when mail is sent, the verified addresses) of those signed in are kept."""

    def __init__(
        self,
        public_url: str,
        oidc: OidcConfig | None,
        verifier: OidcVerifier | None,
        identity: BrowserSessions,
        key: bytes,
        client_secret: str | None,
        groups: SignedInGroups,
        addresses: SignedInAddresses | None = None,
    ) -> None:
        self.public_url = public_url.rstrip("/")
        self.oidc = oidc
        self.verifier = verifier
        self.identity = identity
        self.client_secret = client_secret
        self.groups = groups
        """Where the groups of each sign-in's ID token are kept, for the session it starts (admins, approvers)."""
        self.addresses = addresses
        self.secure = self.public_url.startswith("https://")
        self._pending = URLSafeTimedSerializer(key, salt="elicithub-oidc-sign-in")
        self.router = APIRouter(include_in_schema=False)
        self.router.add_api_route("/auth/sign-in", self.sign_in, methods=["GET"])
        self.router.add_api_route(CALLBACK_PATH, self.signed_in, methods=["GET"])
        self.router.add_api_route("/auth/session", self.session, methods=["GET"])
        self.router.add_api_route("/auth/sign-out", self.sign_out, methods=["POST"])

    async def sign_in(self, request: Request) -> Response:
        if self.verifier is None or self.oidc is None or self.oidc.client_id is None:
            return _page(404, "No sign-in here", "This hub has no identity provider for people to sign in with.")
        try:
            metadata = await self.verifier.discover()
        except IdentityUnavailable as exc:
            return _page(503, "Cannot sign in now", str(exc))
        pending = {"state": secrets.token_urlsafe(32), "verifier": secrets.token_urlsafe(48)}
        pending["nonce"] = secrets.token_urlsafe(32)
        async with self._client() as client:
            url, _ = client.create_authorization_url(
                metadata["authorization_endpoint"],
                state=pending["state"],
                code_verifier=pending["verifier"],
                nonce=pending["nonce"],
            )
        response = RedirectResponse(url, status_code=302, headers={"cache-control": "no-store"})
        response.set_cookie(
            PENDING_COOKIE,
            self._pending.dumps(pending),
            max_age=PENDING_MAX_AGE_S,
            path=CALLBACK_PATH,
            httponly=True,
            samesite="lax",
            secure=self.secure,
        )
        return response

    async def signed_in(self, request: Request, code: str = "", state: str = "", error: str = "") -> Response:
        if self.verifier is None:
            return _page(404, "No sign-in here", "This hub has no identity provider for people to sign in with.")
        again = '<p><a href="/auth/sign-in">Sign in again</a></p>'
        if error:
            return _page(400, "Not signed in", f"The identity provider said: {error}.", again)
        try:
            pending = self._pending.loads(request.cookies.get(PENDING_COOKIE, ""), max_age=PENDING_MAX_AGE_S)
        except BadSignature:
            pending = None
        if not isinstance(pending, dict) or not hmac.compare_digest(str(pending.get("state")), state) or not code:
            return _page(400, "Not signed in", "This sign-in was started elsewhere or took too long.", again)
        from authlib.integrations.httpx_client import OAuthError as AuthlibOAuthError

        try:
            metadata = await self.verifier.discover()
            async with self._client() as client:
                verifier = pending["verifier"]
                token = await client.fetch_token(metadata["token_endpoint"], code=code, code_verifier=verifier)
            person = await self.verifier.signed_in(str(token.get("id_token", "")), pending["nonce"])
        except IdentityUnavailable as exc:
            return _page(503, "Cannot sign in now", str(exc), again)
        except AuthlibOAuthError as exc:
            return _page(502, "Not signed in", f"The identity provider refused the sign-in ({exc.error}).", again)
        if person is None:
            return _page(401, "Not signed in", "The identity provider's answer could not be verified.", again)
        await self.groups.remember(person.user_id, self.verifier.groups(str(token.get("id_token", "")), id_token=True))
        if self.addresses is not None:
            await self.addresses.remember(person.user_id, person.email)
        response = RedirectResponse("/", status_code=302, headers={"cache-control": "no-store"})
        response.delete_cookie(PENDING_COOKIE, path=CALLBACK_PATH)
        await self.identity.start_provider_session(response, person, token, secure=self.secure)
        return response

    async def session(self, request: Request) -> Response:
        """Who this browser is signed in as, with the way out (or in)."""
        try:
            session = await self.identity.session(request)
        except IdentityUnavailable as exc:
            return _page(503, "Cannot check your sign-in now", str(exc))
        if session is None:
            link = '<p><a href="/auth/sign-in">Sign in</a></p>' if self.oidc is not None else ""
            return _page(200, "Not signed in", "This browser is not signed in to the hub.", link)
        form = '<form method="post" action="/auth/sign-out"><button type="submit">Sign out</button></form>'
        return _page(200, "Signed in", f"Signed in as {session.name or session.user_id}.", form)

    async def sign_out(self, request: Request) -> Response:
        response = RedirectResponse("/auth/session", status_code=303, headers={"cache-control": "no-store"})
        await self.identity.end_session(request, response)
        return response

    def _client(self) -> AsyncOAuth2Client:
        assert self.oidc is not None
        return widget_client(self.oidc, self.public_url, self.client_secret)


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
