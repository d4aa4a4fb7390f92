"""The hub as an OAuth 2.1 client of a downstream server's authorization server: discovery, registration, PKCE."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
)
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from pydantic import ValidationError

from elicithub.auth.vault import ClientRegistration, Credential, Vault
from elicithub.config import McpServerConfig, OAuthConfig

log = logging.getLogger(__name__)

_METADATA_TTL_S = 300.0


class OAuthProblem(Exception):
    """The authorization server could not be found, or refused us; the message is safe to show a person."""


@dataclass(frozen=True)
class AuthServer:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    resource: str | None  # RFC 8707 resource indicator: the protected MCP server
    scope: str | None
    auth_methods: list[str] | None = None  # token_endpoint_auth_methods_supported


@dataclass(frozen=True)
class Authorization:
    url: str
    code_verifier: str


class OAuthClient:
    """One per hub: finds each server's authorization server and runs code + PKCE flows and refreshes against it."""

    def __init__(self, vault: Vault, callback_url: str) -> None:
        self.vault = vault
        self.callback_url = callback_url
        self._servers: dict[str, tuple[float, AuthServer]] = {}

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=15, follow_redirects=False)

    async def auth_server(self, server: McpServerConfig) -> AuthServer:
        cached = self._servers.get(server.id)
        if cached is not None and time.monotonic() - cached[0] < _METADATA_TTL_S:
            return cached[1]
        found = await self._discover(server)
        self._servers[server.id] = (time.monotonic(), found)
        return found

    async def _discover(self, server: McpServerConfig) -> AuthServer:
        oauth = server.oauth
        scopes = " ".join(oauth.scopes) if oauth and oauth.scopes else None
        if oauth is not None and oauth.authorization_endpoint and oauth.token_endpoint:
            issuer = oauth.issuer or oauth.authorization_endpoint
            return AuthServer(issuer, oauth.authorization_endpoint, oauth.token_endpoint, None, server.url, scopes)
        assert server.url is not None
        async with self._http() as http:
            found_at, resource = await _first(
                http, build_protected_resource_metadata_discovery_urls(None, server.url), _prm
            )
            if resource is not None and not _describes(str(resource.resource), found_at):
                # RFC 9728 §3.3: metadata naming another resource must not be used, or the hub would request a
                # token for that resource and send it there.
                log.warning(
                    "%s: protected-resource metadata at %s names the resource %s; not used",
                    server.id,
                    found_at,
                    resource.resource,
                )
                raise OAuthProblem(
                    f"{server.display_name}'s protected-resource metadata names another resource "
                    f"({urlsplit(str(resource.resource)).netloc or resource.resource}), so the hub did not sign in."
                )
            issuer_url = oauth.issuer if oauth and oauth.issuer else None
            if issuer_url is None and resource is not None and resource.authorization_servers:
                issuer_url = str(resource.authorization_servers[0])
            urls = build_oauth_authorization_server_metadata_discovery_urls(issuer_url, server.url)
            _, metadata = await _first(http, urls, _asm)
        if metadata is None:
            raise OAuthProblem(f"Could not find the authorization server for {server.display_name}.")
        if scopes is None and resource is not None and resource.scopes_supported:
            scopes = " ".join(resource.scopes_supported)
        return AuthServer(
            issuer=str(metadata.issuer),
            authorization_endpoint=str(metadata.authorization_endpoint),
            token_endpoint=str(metadata.token_endpoint),
            registration_endpoint=str(metadata.registration_endpoint) if metadata.registration_endpoint else None,
            resource=str(resource.resource) if resource is not None else server.url,
            scope=scopes,
            auth_methods=metadata.token_endpoint_auth_methods_supported,
        )

    async def registration(self, server: McpServerConfig, found: AuthServer) -> ClientRegistration:
        """The configured client, else the one registered before, else register now (RFC 7591)."""
        if server.oauth is not None and server.oauth.client_id is not None:
            env = server.oauth.client_secret_env
            secret = os.environ.get(env) if env else None
            if env and not secret:
                raise OAuthProblem(f"The hub is missing the client secret for {server.display_name} (${env}).")
            return ClientRegistration(server.oauth.client_id, secret, _auth_method(server.oauth, secret, found))
        known = await self.vault.client(found.issuer)
        if known is not None:
            return known
        if found.registration_endpoint is None:
            raise OAuthProblem(
                f"{server.display_name}'s authorization server does not register clients; "
                "configure oauth.client_id for it."
            )
        metadata: dict[str, Any] = {
            "client_name": "elicithub",
            "redirect_uris": [self.callback_url],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_post",
        }
        if found.scope:
            metadata["scope"] = found.scope
        async with self._http() as http:
            response = await http.post(found.registration_endpoint, json=metadata)
        if response.status_code not in (200, 201):
            raise OAuthProblem(f"{server.display_name}'s authorization server refused to register the hub.")
        body = response.json()
        client = ClientRegistration(
            body["client_id"], body.get("client_secret"), body.get("token_endpoint_auth_method", "client_secret_post")
        )
        await self.vault.save_client(found.issuer, client)
        log.info("registered with the authorization server of %s", server.id)
        return client

    def _oauth2(self, client: ClientRegistration, found: AuthServer) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=client.client_id,
            client_secret=client.client_secret,
            token_endpoint_auth_method=client.token_endpoint_auth_method,
            scope=found.scope,
            redirect_uri=self.callback_url,
            code_challenge_method="S256",
            timeout=15,
        )

    async def authorization(self, server: McpServerConfig, state: str) -> Authorization:
        found = await self.auth_server(server)
        client = await self.registration(server, found)
        verifier = generate_token(64)
        extra = {"resource": found.resource} if found.resource else {}
        async with self._oauth2(client, found) as oauth:
            url, _ = oauth.create_authorization_url(
                found.authorization_endpoint, state=state, code_verifier=verifier, **extra
            )
        return Authorization(url, verifier)

    async def exchange(self, server: McpServerConfig, code: str, code_verifier: str) -> Credential:
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

    async def refresh(self, server: McpServerConfig, credential: Credential) -> Credential:
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


def _credential(token: dict[str, Any]) -> Credential:
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


async def _first(http: httpx.AsyncClient, urls: list[str], parse: Any) -> tuple[str, Any]:
    """The first of `urls` that serves valid metadata: where, and what (None when none does)."""
    for url in urls:
        try:
            response = await http.get(url, headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            log.debug("metadata at %s unreachable: %s", url, exc)
            continue
        if response.status_code == 200:
            try:
                return url, parse(response.content)
            except ValidationError:
                log.warning("metadata at %s is not valid", url)
    return "", None


_PRM_PATH = "/.well-known/oauth-protected-resource"


def _describes(resource: str, found_at: str) -> bool:
    """Whether metadata found at `found_at` may name `resource`: the resource identifier its well-known URL was
    built from (RFC 9728 §3.3), compared without a trailing slash and with scheme and host in lower case."""
    at = urlsplit(found_at)
    expected = f"{at.scheme}://{at.netloc}{at.path.removeprefix(_PRM_PATH)}"
    return _canonical(resource) == _canonical(expected)


def _canonical(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


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


def _prm(body: bytes) -> ProtectedResourceMetadata:
    return ProtectedResourceMetadata.model_validate_json(body)


def _asm(body: bytes) -> OAuthMetadata:
    return OAuthMetadata.model_validate_json(body)
