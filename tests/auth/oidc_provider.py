"""An OpenID provider on loopback for the hub's identity tests: discovery, a JWKS of two keys that can rotate, a
sign-in page, and the SDK's authorization, token and registration handlers issuing JWT access tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

from joserfc import jwt
from joserfc.jwk import RSAKey
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.conftest import ServedInThread, free_port, served


class OAuthIdToken(OAuthToken):
    """A token response with an OpenID Connect ID token."""

    id_token: str


AUDIENCE = "elicithub"
WEB_CLIENT = "elicithub-web"
SCOPES = ["openid", "profile", "email"]
LOGIN_PATH = "/login"


@dataclass
class Seen:
    jwks_fetches: int = 0
    authorize_resources: list[str | None] = field(default_factory=list)
    refresh_grants: int = 0  # token requests with grant_type=refresh_token, granted or not


class Provider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """Signs with the newest of its keys; publishes all of them. A person signs in by typing a user name. Access
    tokens last `access_ttl_s`; each refresh token is taken once (rotated) until the person signs out here."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.keys = [_key("k1"), _key("k2")]
        self.seen = Seen()
        self.jwks_down = False
        self.token_down = False  # the token endpoint answers 503
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self._pending: dict[str, tuple[OAuthClientInformationFull, AuthorizationParams]] = {}
        self._codes: dict[str, AuthorizationCode] = {}
        self.nonces: dict[str, str] = {}  # state -> the authorization request's nonce, then code -> nonce
        self.groups: dict[str, list[str]] = {}  # user -> the `groups` claim of the tokens a sign-in gets
        self.names: dict[str, str] = {}  # user -> the `name` their ID tokens carry
        self.emails: dict[str, tuple[str, bool]] = {}  # user -> the `email` their ID tokens carry, and if verified
        self.access_ttl_s = 300
        self.refresh_tokens: dict[str, RefreshToken] = {}

    def register_web_client(self, redirect_uri: str, client_id: str = WEB_CLIENT) -> None:
        """The hub's widget (or another app) as a public client of this provider, as an admin would register it."""
        self.clients[client_id] = OAuthClientInformationFull(
            client_id=client_id,
            redirect_uris=[AnyUrl(redirect_uri)],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=" ".join(SCOPES),
        )

    # -- tokens

    def mint(self, sub: str = "alice", *, key: Any = None, header: dict[str, Any] | None = None, **claims: Any) -> str:
        """A JWT for `sub`, good by default; `claims` (None drops one) and `header` override, `key` signs."""
        now = int(time.time())
        body = {"iss": self.issuer, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, **claims}
        signer = key if key is not None else self.keys[-1]
        protected = {"alg": "RS256", "kid": signer.kid, **(header or {})}
        algorithms = [protected["alg"]]
        return jwt.encode(protected, {k: v for k, v in body.items() if v is not None}, signer, algorithms=algorithms)

    def rotate(self) -> RSAKey:
        """A new signing key; the oldest leaves the key set."""
        key = _key(f"k{int(self.keys[-1].kid[1:]) + 1}")
        self.keys = [*self.keys[1:], key]
        return key

    def jwks(self) -> dict[str, Any]:
        return {"keys": [{**k.as_dict(private=False), "use": "sig", "alg": "RS256"} for k in self.keys]}

    # -- the SDK's provider interface

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.seen.authorize_resources.append(params.resource)
        request_id = secrets.token_urlsafe(16)
        self._pending[request_id] = (client, params)
        return f"{self.issuer}{LOGIN_PATH}?{urlencode({'request': request_id})}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self._codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self._codes[authorization_code.code]
        subject = authorization_code.subject or ""
        token = self._tokens(client, subject, authorization_code.scopes, authorization_code.resource)
        if "openid" in authorization_code.scopes:
            nonce = self.nonces.pop(authorization_code.code, None)
            name = self.names.get(subject)
            email, verified = self.emails.get(subject, (None, None))
            claims = {"name": name, "groups": self.groups.get(subject), "email": email, "email_verified": verified}
            id_token = self.mint(subject, aud=client.client_id, nonce=nonce, **claims)
            return OAuthIdToken(**token.model_dump(), id_token=id_token)
        return token

    def _tokens(
        self, client: OAuthClientInformationFull, subject: str, scopes: list[str], resource: str | None
    ) -> OAuthToken:
        # RFC 8707: a token asked for one resource is for that resource only.
        access = self.mint(subject, aud=resource or AUDIENCE, scope=" ".join(SCOPES), groups=self.groups.get(subject))
        refresh: str | None = None
        if "refresh_token" in (client.grant_types or []):
            refresh = secrets.token_urlsafe(24)
            self.refresh_tokens[refresh] = RefreshToken(
                token=refresh, client_id=client.client_id or "", scopes=scopes, resource=resource, subject=subject
            )
        return OAuthToken(
            access_token=access, expires_in=self.access_ttl_s, scope=" ".join(scopes), refresh_token=refresh
        )

    def sign_out(self, subject: str) -> None:
        """The person's session here ends: their refresh tokens are refused from now on."""
        self.refresh_tokens = {k: t for k, t in self.refresh_tokens.items() if t.subject != subject}

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        self.seen.refresh_grants += 1
        return self.refresh_tokens.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        del self.refresh_tokens[refresh_token.token]  # rotated: a refresh token is good once
        return self._tokens(client, refresh_token.subject or "", scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return None

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        return None

    # -- pages

    async def login(self, request: Request) -> Response:
        """`GET /login?request=…` asks who you are; `POST` signs that person in and goes back to the client."""
        if request.method == "GET":
            request_id = html.escape(request.query_params.get("request", ""))
            page = f"""<!doctype html><title>Sign in · test provider</title><h1>Sign in to the test provider</h1>
<form method="post" action="{LOGIN_PATH}"><input type="hidden" name="request" value="{request_id}">
<label>User <input name="username"></label><button type="submit">Sign in</button></form>"""
            return HTMLResponse(page)
        form = await request.form()
        client, params = self._pending.pop(str(form.get("request", "")))
        code = AuthorizationCode(
            code=secrets.token_urlsafe(24),
            scopes=params.scopes or SCOPES,
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=str(form.get("username", "")),
        )
        self._codes[code.code] = code
        if params.state in self.nonces:
            self.nonces[code.code] = self.nonces.pop(params.state)
        return RedirectResponse(
            construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state), 302
        )


class OidcProvider:
    """The provider served on loopback; `base` is its issuer."""

    def __init__(self, server: ServedInThread, provider: Provider) -> None:
        self.server = server
        self.provider = provider
        self.base = server.url

    def config(self, **extra: Any) -> dict[str, Any]:
        """The hub's `auth.oidc` for this provider."""
        return {"issuer": self.base, "audience": AUDIENCE, "client_id": WEB_CLIENT, **extra}


def _key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid})


def forged_hs256(token: str, key: RSAKey) -> str:
    """`token`'s claims re-signed HS256 with the public key's PEM as the secret: the classic key-confusion forgery
    (by hand, since a JOSE library rightly refuses to make it)."""
    header = _b64(json.dumps({"alg": "HS256", "kid": key.kid}).encode())
    signing_input = f"{header}.{token.split('.')[1]}"
    signature = hmac.new(key.as_pem(private=False), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def app_for(provider: Provider) -> ASGIApp:
    issuer = AnyHttpUrl(provider.issuer)
    registration = ClientRegistrationOptions(enabled=True, valid_scopes=SCOPES, default_scopes=SCOPES)
    routes = [
        r
        for r in create_auth_routes(provider, issuer, None, registration, RevocationOptions(enabled=False))
        if isinstance(r, Route) and not r.path.startswith("/.well-known/")
    ]

    async def discovery(_: Request) -> Response:
        base = provider.issuer
        return JSONResponse(
            {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "jwks_uri": f"{base}/jwks",
                "scopes_supported": SCOPES,
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    async def jwks(_: Request) -> Response:
        provider.seen.jwks_fetches += 1
        if provider.jwks_down:
            return JSONResponse({"error": "unavailable"}, status_code=503)
        return JSONResponse(provider.jwks())

    routes += [
        Route("/.well-known/openid-configuration", discovery),
        Route("/jwks", jwks),
        Route(LOGIN_PATH, provider.login, methods=["GET", "POST"]),
    ]
    app = Starlette(routes=routes)

    down = JSONResponse({"error": "temporarily_unavailable"}, status_code=503)

    async def noting_nonce(scope: Scope, receive: Receive, send: Send) -> None:
        # The SDK's authorization handler knows no OpenID nonce: keep it by state, for the ID token.
        if scope["type"] == "http" and scope["path"] == "/authorize":
            query = parse_qs(scope["query_string"].decode())
            if "nonce" in query and "state" in query:
                provider.nonces[query["state"][0]] = query["nonce"][0]
        if scope["type"] == "http" and scope["path"] == "/token" and provider.token_down:
            await down(scope, receive, send)
            return
        await app(scope, receive, send)

    return noting_nonce


@contextmanager
def oidc_provider() -> Iterator[OidcProvider]:
    port = free_port()
    provider = Provider(f"http://127.0.0.1:{port}")
    with served(app_for(provider), port) as server:
        yield OidcProvider(server, provider)
