"""The hub as an OAuth 2.1 client of a downstream server's authorization server: registration (configured, client
ID metadata document, or dynamic), code + PKCE flows, refreshes.

Every hub has one, and few ever sign anyone in: the libraries a flow stands on (authlib, httpx, the MCP SDK's
discovery) are imported by the first flow, not by the hub's start."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlsplit

from elicithub.auth.vault import ClientRegistration, Credential, Vault
from elicithub.config import OAuthConfig, ServiceConfig
from elicithub.core.jsoncodec import JsonObject
from elicithub.errors import HubError

if TYPE_CHECKING:
    import httpx
    from authlib.integrations.httpx_client import AsyncOAuth2Client

__all__ = ["AuthServer", "Authorization", "OAuthClient", "OAuthProblem"]

log = logging.getLogger(__name__)

_METADATA_TTL_S = 300.0


class OAuthProblem(HubError):
    """The authorization server could not be found, or refused us; the message is safe to show a person."""


@dataclass(frozen=True)
class AuthServer:
    """A server's authorization server, as discovered (auth/discovery.py) or configured."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    resource: str | None  # RFC 8707 resource indicator: the protected MCP server
    scope: str | None
    auth_methods: list[str] | None = None  # token_endpoint_auth_methods_supported
    client_id_metadata: bool = False  # client_id_metadata_document_supported


CLIENT_METADATA_PATH = "/oauth/client-metadata.json"
"""Where the hub serves its OAuth client ID metadata document; its URL is the hub's client_id at authorization
servers that support such documents."""


class ClientMetadata(TypedDict, total=False):
    """The hub as an OAuth client (RFC 7591): its metadata document, or what it registers with."""

    client_id: str | None
    client_name: str
    client_uri: str
    redirect_uris: list[str]
    grant_types: list[str]
    response_types: list[str]
    token_endpoint_auth_method: str
    scope: str


@dataclass(frozen=True)
class Authorization:
    url: str
    code_verifier: str


class OAuthClient:
    """One per hub: finds each server's authorization server and runs code + PKCE flows and refreshes against it.
    `public_url` is where the hub is reached: its callback, and its client ID metadata document."""

    def __init__(self, vault: Vault, public_url: str) -> None:
        self.vault = vault
        self.public_url = public_url.rstrip("/")
        self.callback_url = self.public_url + "/auth/callback"
        self._servers: dict[str, tuple[float, AuthServer]] = {}

    @property
    def client_metadata_url(self) -> str | None:
        """The hub's client_id as a metadata document URL: https, or http on a loopback host (for development)."""
        url = self.public_url + CLIENT_METADATA_PATH
        parts = urlsplit(url)
        if parts.scheme == "https" or parts.hostname in ("127.0.0.1", "localhost", "::1"):
            return url
        return None

    def client_metadata(self) -> ClientMetadata:
        """The document served at `client_metadata_url`: a public client using PKCE."""
        return {
            "client_id": self.client_metadata_url,
            "client_name": "elicithub",
            "client_uri": self.public_url,
            "redirect_uris": [self.callback_url],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }

    def _http(self) -> httpx.AsyncClient:
        import httpx

        return httpx.AsyncClient(timeout=15, follow_redirects=False)

    async def auth_server(self, server: ServiceConfig) -> AuthServer:
        cached = self._servers.get(server.id)
        if cached is not None and time.monotonic() - cached[0] < _METADATA_TTL_S:
            return cached[1]
        found = await self._discover(server)
        self._servers[server.id] = (time.monotonic(), found)
        return found

    async def _discover(self, server: ServiceConfig) -> AuthServer:
        oauth = server.oauth
        if oauth is not None and oauth.authorization_endpoint and oauth.token_endpoint:
            scopes = " ".join(oauth.scopes) if oauth.scopes else None
            issuer = oauth.issuer or oauth.authorization_endpoint
            return AuthServer(issuer, oauth.authorization_endpoint, oauth.token_endpoint, None, server.url, scopes)
        from elicithub.auth.discovery import discover

        return await discover(server)

    async def registration(self, server: ServiceConfig, found: AuthServer) -> ClientRegistration:
        """The configured client; else the hub's client ID metadata document where the server takes one; else the
        client registered before (if registered for the scope wanted now); else register now (RFC 7591)."""
        if server.oauth is not None and server.oauth.client_id is not None:
            env = server.oauth.client_secret_env
            secret = os.environ.get(env) if env else None
            if env and not secret:
                raise OAuthProblem(f"The hub is missing the client secret for {server.display_name} (${env}).")
            return ClientRegistration(server.oauth.client_id, secret, _auth_method(server.oauth, secret, found))
        if found.client_id_metadata and self.client_metadata_url is not None:
            return ClientRegistration(self.client_metadata_url, None, "none")
        known = await self.vault.client(found.issuer)
        if known is not None and _covers(known.scope, found.scope):
            return known
        if found.registration_endpoint is None:
            raise OAuthProblem(
                f"{server.display_name}'s authorization server does not register clients; "
                "configure oauth.client_id for it."
            )
        from mcp.client.auth.utils import union_scopes

        # A client registered for fewer scopes registers again for all of them, or a step-up could not ask.
        scope = union_scopes(known.scope if known is not None else None, found.scope)
        metadata: ClientMetadata = {
            "client_name": "elicithub",
            "redirect_uris": [self.callback_url],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_post",
        }
        if scope:
            metadata["scope"] = scope
        async with self._http() as http:
            response = await http.post(found.registration_endpoint, json=metadata)
        if response.status_code not in (200, 201):
            raise OAuthProblem(f"{server.display_name}'s authorization server refused to register the hub.")
        body = response.json()
        client = ClientRegistration(
            body["client_id"],
            body.get("client_secret"),
            body.get("token_endpoint_auth_method", "client_secret_post"),
            body.get("scope", scope),
        )
        await self.vault.save_client(found.issuer, client)
        log.info("registered with the authorization server of %s", server.id)
        return client

    def _oauth2(self, client: ClientRegistration, found: AuthServer) -> AsyncOAuth2Client:
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        return AsyncOAuth2Client(
            client_id=client.client_id,
            client_secret=client.client_secret,
            token_endpoint_auth_method=client.token_endpoint_auth_method,
            scope=found.scope,
            redirect_uri=self.callback_url,
            code_challenge_method="S256",
            timeout=15,
        )

    async def authorization(self, server: ServiceConfig, state: str, *, scope: str | None = None) -> Authorization:
        """Where to send the person to sign in; `scope` asks for more than the server's usual (a step-up)."""
        from authlib.common.security import generate_token
        from mcp.client.auth.utils import union_scopes

        found = await self.auth_server(server)
        if scope:
            found = replace(found, scope=union_scopes(found.scope, scope))
        client = await self.registration(server, found)
        verifier = generate_token(64)
        extra = {"resource": found.resource} if found.resource else {}
        async with self._oauth2(client, found) as oauth:
            url, _ = oauth.create_authorization_url(
                found.authorization_endpoint, state=state, code_verifier=verifier, **extra
            )
        return Authorization(url, verifier)

    async def exchange(self, server: ServiceConfig, code: str, code_verifier: str) -> Credential:
        found = await self.auth_server(server)
        client = await self.registration(server, found)
        extra = _token_params(client, found)
        async with self._oauth2(client, found) as oauth:
            try:
                token = await oauth.fetch_token(
                    found.token_endpoint,
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=code_verifier,
                    **extra,
                )
            except Exception as exc:
                raise OAuthProblem(f"{server.display_name} did not accept the sign-in ({_oauth_error(exc)}).") from None
        return _credential(token)

    async def refresh(self, server: ServiceConfig, credential: Credential) -> Credential:
        assert credential.refresh_token is not None
        found = await self.auth_server(server)
        client = await self.registration(server, found)
        extra = _token_params(client, found)
        async with self._oauth2(client, found) as oauth:
            try:
                token = await oauth.refresh_token(found.token_endpoint, refresh_token=credential.refresh_token, **extra)
            except Exception as exc:
                raise OAuthProblem(
                    f"{server.display_name} refused to refresh the token ({_oauth_error(exc)})."
                ) from None
        refreshed = _credential(token)
        if refreshed.refresh_token is None:  # the server kept the old refresh token valid
            refreshed = Credential(**{**refreshed.__dict__, "refresh_token": credential.refresh_token})
        return refreshed


def _token_params(client: ClientRegistration, found: AuthServer) -> dict[str, str]:
    """What a token request carries besides the grant: the RFC 8707 resource, and with client_secret_basic the
    client_id too (the official SDK's authorization server looks the client up by the body's client_id)."""
    params = {"resource": found.resource} if found.resource else {}
    if client.token_endpoint_auth_method == "client_secret_basic":
        params["client_id"] = client.client_id
    return params


def _credential(token: JsonObject) -> Credential:
    if not token.get("access_token"):
        raise OAuthProblem("The authorization server answered without an access token.")
    expires_in = token.get("expires_in")
    expires_at = token.get("expires_at") or (time.time() + float(expires_in) if expires_in else None)
    return Credential(
        access_token=str(token["access_token"]),
        token_type=str(token.get("token_type") or "Bearer"),
        refresh_token=token.get("refresh_token"),
        expires_at=float(expires_at) if expires_at else None,
        scope=token.get("scope"),
    )


def _oauth_error(exc: Exception) -> str:
    # authlib's OAuthError carries the server's error code; never echo bodies, which could hold secrets.
    code = getattr(exc, "error", None)
    return str(code) if code else type(exc).__name__


def _auth_method(oauth: OAuthConfig, secret: str | None, found: AuthServer) -> str:
    """How a pre-registered client authenticates at the token endpoint: as configured, else none without a
    secret, else client_secret_basic when the server lists it or lists nothing (the default every server
    supports, OAuth 2.1 §2.4.1), else client_secret_post."""
    if oauth.token_endpoint_auth_method is not None:
        return oauth.token_endpoint_auth_method
    if not secret:
        return "none"
    supported = found.auth_methods
    if supported is None or "client_secret_basic" in supported or "client_secret_post" not in supported:
        return "client_secret_basic"
    return "client_secret_post"


def _covers(registered: str | None, wanted: str | None) -> bool:
    """Whether a client registered for `registered` scopes (None: unrecorded, assumed enough) may ask for `wanted`."""
    return registered is None or not wanted or set(wanted.split()) <= set(registered.split())
