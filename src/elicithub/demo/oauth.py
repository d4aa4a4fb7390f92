"""A development OAuth 2.1 authorization server: in-memory, with its own consent page. Loopback use only."""

from __future__ import annotations

import html
import math
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

SCOPE = "issues"
CONSENT_PATH = "/consent"
_CODE_TTL_S = 300.0
_CONSENT_TTL_S = 600.0
_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    # The page needs no scripts, images or frames; refusing to be framed stops clickjacking of the Allow button.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


@dataclass
class _Consent:
    """An authorization request waiting for the person's Allow or Deny."""

    client: OAuthClientInformationFull
    params: AuthorizationParams
    deadline: float


@dataclass
class _Grant:
    """One access/refresh token pair issued to one client for one resource owner."""

    access: AccessToken
    refresh: RefreshToken
    access_deadline: float


class DemoOAuthProvider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """The SDK's `OAuthAuthorizationServerProvider`, kept in memory; `authorize` sends the person to `consent_page`.

    Serve `consent_page` at `CONSENT_PATH` next to the SDK's `create_auth_routes`.

    Every Allow creates a new resource owner (`subject`), so each person who connects gets their own data.
    """

    def __init__(self, issuer_url: str, *, token_ttl: float = 3600.0) -> None:
        if token_ttl <= 0:
            raise ValueError("token_ttl must be positive")
        self.issuer_url = issuer_url.rstrip("/")
        self.token_ttl = token_ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self._consents: dict[str, _Consent] = {}
        self._codes: dict[str, AuthorizationCode] = {}
        self._by_access: dict[str, _Grant] = {}
        self._by_refresh: dict[str, _Grant] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self._forget_stale()
        request_id = secrets.token_urlsafe(24)
        self._consents[request_id] = _Consent(client, params, time.monotonic() + _CONSENT_TTL_S)
        return f"{self.issuer_url}{CONSENT_PATH}?{urlencode({'request': request_id})}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self._codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self._codes[authorization_code.code]
        return self._issue(
            client.client_id, authorization_code.scopes, authorization_code.resource, authorization_code.subject
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        grant = self._by_refresh.get(refresh_token)
        return grant.refresh if grant is not None and grant.refresh.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        # Rotation: the old pair dies with the exchange, so a leaked refresh token works at most once.
        self.revoke(refresh_token.token)
        return self._issue(client.client_id, scopes, refresh_token.resource, refresh_token.subject)

    async def load_access_token(self, token: str) -> AccessToken | None:
        grant = self._by_access.get(token)
        if grant is None or time.time() >= grant.access_deadline:
            return None
        return grant.access

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.revoke(token.token)

    def revoke(self, token: str) -> bool:
        """Revoke the grant an access or refresh token belongs to (both tokens die); False if it was unknown."""
        grant = self._by_access.get(token) or self._by_refresh.get(token)
        if grant is None:
            return False
        self._by_access.pop(grant.access.token, None)
        self._by_refresh.pop(grant.refresh.token, None)
        return True

    def revoke_all(self) -> int:
        """Revoke every token issued so far; returns how many grants that ended."""
        count = len(self._by_access)
        self._by_access.clear()
        self._by_refresh.clear()
        return count

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, subject: str | None) -> OAuthToken:
        deadline = time.time() + self.token_ttl
        access = AccessToken(
            token=secrets.token_urlsafe(32),
            client_id=client_id,
            scopes=scopes,
            expires_at=math.ceil(deadline),
            resource=resource,
            subject=subject,
        )
        refresh = RefreshToken(
            token=secrets.token_urlsafe(32), client_id=client_id, scopes=scopes, resource=resource, subject=subject
        )
        grant = _Grant(access, refresh, deadline)
        self._by_access[access.token] = grant
        self._by_refresh[refresh.token] = grant
        return OAuthToken(
            access_token=access.token,
            expires_in=math.ceil(self.token_ttl),
            scope=" ".join(scopes),
            refresh_token=refresh.token,
        )

    def _forget_stale(self) -> None:
        now = time.monotonic()
        for request_id in [k for k, c in self._consents.items() if c.deadline < now]:
            del self._consents[request_id]
        wall = time.time()
        for code in [k for k, c in self._codes.items() if c.expires_at < wall]:
            del self._codes[code]

    async def consent_page(self, request: Request) -> Response:
        """`GET /consent?request=...` shows the question; `POST /consent` answers it and goes back to the client."""
        if request.method == "GET":
            request_id = request.query_params.get("request", "")
            consent = self._consents.get(request_id)
            if consent is None or consent.deadline < time.monotonic():
                return _expired()
            return _page("Allow access?", _consent_form(request_id, consent))
        form = await request.form()
        consent = self._consents.pop(str(form.get("request", "")), None)
        if consent is None or consent.deadline < time.monotonic():
            return _expired()
        params = consent.params
        if form.get("decision") != "allow":
            denied = construct_redirect_uri(
                str(params.redirect_uri),
                error="access_denied",
                error_description="The user denied access.",
                state=params.state,
            )
            return RedirectResponse(denied, status_code=302)
        code = AuthorizationCode(
            code=secrets.token_urlsafe(32),
            scopes=params.scopes or (consent.client.scope or SCOPE).split(),
            expires_at=time.time() + _CODE_TTL_S,
            client_id=consent.client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=f"demo-user-{secrets.token_hex(4)}",
        )
        self._codes[code.code] = code
        allowed = construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)
        return RedirectResponse(allowed, status_code=302)


def _consent_form(request_id: str, consent: _Consent) -> str:
    client = html.escape(consent.client.client_name or consent.client.client_id)
    destination = html.escape(urlsplit(str(consent.params.redirect_uri)).netloc or str(consent.params.redirect_uri))
    return f"""<h1>Allow elicithub demo to read your issues?</h1>
<p><strong>{client}</strong> wants to read and create issues in the tracker demo on your behalf.
After you answer you go back to <strong>{destination}</strong>.</p>
<form method="post" action="{CONSENT_PATH}">
<input type="hidden" name="request" value="{html.escape(request_id)}">
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>"""


def _expired() -> HTMLResponse:
    message = "This authorization request has expired or was already answered. Start connecting again from the app."
    return _page("Request expired", f"<p>{message}</p>", status=400)


def _page(title: str, body: str, *, status: int = 200) -> HTMLResponse:
    document = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · tracker demo</title>
<style>body{{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;line-height:1.5}}
button{{font-size:1rem;padding:.5rem 1.5rem;margin-right:.5rem}}</style></head>
<body>{body}</body></html>"""
    return HTMLResponse(document, status_code=status, headers=_PAGE_HEADERS)
