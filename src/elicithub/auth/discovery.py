"""Finding a protected MCP server's authorization server, as MCP 2025-11-25 authorization orders it: the server's
own `WWW-Authenticate` challenge first, then RFC 9728 and RFC 8414 well-known metadata, then (for 2025-03-26
servers that publish none) the default endpoints on the server's origin."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    extract_field_from_www_auth,
)
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from mcp_types import LATEST_PROTOCOL_VERSION
from pydantic import ValidationError

from elicithub.auth.oauth import AuthServer, OAuthProblem
from elicithub.config import ServiceConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Challenge:
    """What the server said to a request without a token: whether it answered at all, and its RFC 6750 / RFC 9728
    `WWW-Authenticate` parameters."""

    reachable: bool
    resource_metadata: str | None = None
    scope: str | None = None


def http_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=15, follow_redirects=False)


async def probe(http: httpx2.AsyncClient, url: str) -> Challenge:
    """Ask the server to `initialize` without a token, never to call a tool, and read its challenge. A server that
    lets us in anyway gets its new session closed again."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "elicithub", "version": version("elicithub")},
        },
    }
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    try:
        async with http.stream("POST", url, json=body, headers=headers) as response:
            session = response.headers.get("mcp-session-id")
            if response.status_code not in (401, 403):
                if session:
                    with contextlib.suppress(httpx2.HTTPError):
                        await http.delete(url, headers={"mcp-session-id": session})
                return Challenge(reachable=True)
            return Challenge(
                reachable=True,
                resource_metadata=extract_field_from_www_auth(response, "resource_metadata"),
                scope=extract_field_from_www_auth(response, "scope"),
            )
    except httpx2.HTTPError as exc:
        log.debug("probing %s failed: %s", url, exc)
        return Challenge(reachable=False)


async def discover(server: ServiceConfig) -> AuthServer:
    """The authorization server of `server`, with the resource and scope to ask it for."""
    assert server.url is not None
    configured = " ".join(server.oauth.scopes) if server.oauth and server.oauth.scopes else None
    async with http_client() as http:
        challenge = await probe(http, server.url)
        prm_urls = build_protected_resource_metadata_discovery_urls(challenge.resource_metadata, server.url)
        _, resource = await _first(http, prm_urls, _prm)
        if resource is not None and not check_resource_allowed(
            resource_url_from_server_url(server.url), str(resource.resource)
        ):
            # RFC 9728 §3.3: metadata naming another resource must not be used, or the hub would request a
            # token for that resource and send it there.
            log.warning("%s: protected-resource metadata names the resource %s; not used", server.id, resource.resource)
            raise OAuthProblem(
                f"{server.display_name}'s protected-resource metadata names another resource "
                f"({urlsplit(str(resource.resource)).netloc or resource.resource}), so the hub did not sign in."
            )
        issuer = server.oauth.issuer if server.oauth and server.oauth.issuer else None
        if issuer is None and resource is not None and resource.authorization_servers:
            issuer = str(resource.authorization_servers[0])
        as_urls = build_oauth_authorization_server_metadata_discovery_urls(issuer, server.url)
        _, metadata = await _first(http, as_urls, _asm)
    # Scope, in the spec's order: the challenge's, else what the resource says it supports, else none at all.
    scope = configured or challenge.scope
    if scope is None and resource is not None and resource.scopes_supported:
        scope = " ".join(resource.scopes_supported)
    target = str(resource.resource) if resource is not None else server.url
    if metadata is not None:
        return AuthServer(
            issuer=str(metadata.issuer),
            authorization_endpoint=str(metadata.authorization_endpoint),
            token_endpoint=str(metadata.token_endpoint),
            registration_endpoint=str(metadata.registration_endpoint) if metadata.registration_endpoint else None,
            resource=target,
            scope=scope,
            auth_methods=metadata.token_endpoint_auth_methods_supported,
            client_id_metadata=metadata.client_id_metadata_document_supported is True,
        )
    if resource is None and issuer is None and challenge.reachable:
        # A 2025-03-26 server without metadata: its origin is the authorization server, at the default paths.
        parts = urlsplit(server.url)
        origin = f"{parts.scheme}://{parts.netloc}"
        log.info("%s publishes no authorization metadata; using the default endpoints on %s", server.id, origin)
        return AuthServer(origin, f"{origin}/authorize", f"{origin}/token", f"{origin}/register", target, scope)
    raise OAuthProblem(f"Could not find the authorization server for {server.display_name}.")


async def _first(http: httpx2.AsyncClient, urls: list[str], parse: Any) -> tuple[str, Any]:
    """The first of `urls` that serves valid metadata: where, and what (None when none does)."""
    for url in urls:
        try:
            response = await http.get(url, headers={"accept": "application/json"})
        except httpx2.HTTPError as exc:
            log.debug("metadata at %s unreachable: %s", url, exc)
            continue
        if response.status_code == 200:
            try:
                return url, parse(response.content)
            except ValidationError:
                log.warning("metadata at %s is not valid", url)
    return "", None


def _prm(body: bytes) -> ProtectedResourceMetadata:
    return ProtectedResourceMetadata.model_validate_json(body)


def _asm(body: bytes) -> OAuthMetadata:
    return OAuthMetadata.model_validate_json(body)
