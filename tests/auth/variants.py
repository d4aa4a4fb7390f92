"""Protected MCP servers whose authorization servers differ the ways real ones do, built on the SDK's server auth
support (its authorization, token and registration handlers over the demo provider): metadata only at the
challenge's URL, scopes only in the challenge, a basic-only token endpoint, step-up scopes, client ID metadata
documents, and a 2025-03-26 server that publishes no metadata at all."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from mcp.server.auth.provider import AuthorizationParams
from mcp.server.auth.routes import build_metadata, create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from elicithub.demo.oauth import CONSENT_PATH, DemoOAuthProvider
from elicithub.surfaces import body_first
from tests.conftest import free_port, served

SCOPES = ["issues", "admin"]
WELL_KNOWN_PRM = "/.well-known/oauth-protected-resource/mcp"
AS_METADATA = "/.well-known/oauth-authorization-server"


@dataclass
class Variant:
    prm_path: str | None = WELL_KNOWN_PRM  # None: no protected-resource metadata
    challenge_metadata: bool = True  # resource_metadata= in the 401's WWW-Authenticate
    challenge_scope: str | None = None  # scope= in the 401's WWW-Authenticate
    prm_scopes: list[str] | None = field(default_factory=lambda: ["issues"])
    as_metadata: bool = True
    auth_methods: list[str] | None = None  # token_endpoint_auth_methods_supported, when not the SDK's
    cimd: bool = False  # client_id_metadata_document_supported
    registration: bool = True
    needs: dict[str, str] = field(default_factory=dict)  # tool -> the scope it needs
    grants: list[str] = field(default_factory=lambda: list(SCOPES))  # what consent grants at most


@dataclass
class Seen:
    """What the variant saw: rejected requests by JSON-RPC method, tool calls, scopes asked for, documents fetched."""

    rejected: Counter[str] = field(default_factory=Counter)
    forbidden: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[str] = field(default_factory=Counter)
    authorize_scopes: list[list[str] | None] = field(default_factory=list)
    client_ids: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)


class VariantProvider(DemoOAuthProvider):
    def __init__(self, issuer: str, variant: Variant, seen: Seen) -> None:
        super().__init__(issuer)
        self.variant = variant
        self.seen = seen

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if self.variant.cimd and client_id.startswith(("https://", "http://")):
            # A client ID metadata document: the client is whatever the document at its id says.
            async with httpx.AsyncClient(timeout=10) as http:
                response = await http.get(client_id)
            self.seen.documents.append(client_id)
            if response.status_code != 200 or response.json().get("client_id") != client_id:
                return None
            document = response.json()
            return OAuthClientInformationFull(**{**document, "scope": " ".join(SCOPES)})
        return await super().get_client(client_id)

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.seen.authorize_scopes.append(params.scopes)
        self.seen.client_ids.append(client.client_id)
        if params.scopes is not None:
            params = params.model_copy(update={"scopes": [s for s in params.scopes if s in self.variant.grants]})
        return await super().authorize(client, params)


class VariantServer:
    """One variant on loopback: the authorization server and the protected MCP server `{base}/mcp` on one port."""

    def __init__(self, variant: Variant) -> None:
        self.variant = variant
        self.seen = Seen()
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self.provider = VariantProvider(self.base, variant, self.seen)

    def app(self) -> ASGIApp:
        server = MCPServer("variant", log_level="WARNING")

        @server.tool(structured_output=False)
        async def whoami() -> str:
            """Say hello."""
            self.seen.tool_calls["whoami"] += 1
            return "hello from the variant"

        @server.tool(structured_output=False)
        async def admin_report() -> str:
            """The admin report (needs more access)."""
            self.seen.tool_calls["admin_report"] += 1
            return "admin report: all good"

        server.custom_route(CONSENT_PATH, methods=["GET", "POST"])(self.provider.consent_page)
        app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
        app.router.routes.extend(self._auth_routes())
        return _Gate(app, self)

    def _auth_routes(self) -> list[Route]:
        v = self.variant
        issuer = AnyHttpUrl(self.base)
        registration = ClientRegistrationOptions(enabled=v.registration, valid_scopes=SCOPES, default_scopes=["issues"])
        revocation = RevocationOptions(enabled=False)
        routes = [
            r
            for r in create_auth_routes(self.provider, issuer, None, registration, revocation)
            if isinstance(r, Route) and r.path != AS_METADATA
        ]
        if v.as_metadata:
            metadata = build_metadata(issuer, None, registration, revocation).model_dump(mode="json", exclude_none=True)
            if v.auth_methods is not None:
                metadata["token_endpoint_auth_methods_supported"] = v.auth_methods
            if v.cimd:
                metadata["client_id_metadata_document_supported"] = True

            async def as_metadata(request: Request) -> Response:
                return JSONResponse(metadata)

            routes.append(Route(AS_METADATA, as_metadata))
        if v.prm_path is not None:
            resource: dict[str, Any] = {"resource": self.url, "authorization_servers": [self.base]}
            if v.prm_scopes is not None:
                resource["scopes_supported"] = v.prm_scopes

            async def prm(request: Request) -> Response:
                return JSONResponse(resource)

            routes.append(Route(v.prm_path, prm))
        return routes

    def challenge(self, error: str, scope: str | None) -> str:
        parts = [f'error="{error}"']
        if self.variant.challenge_metadata and self.variant.prm_path is not None:
            parts.append(f'resource_metadata="{self.base}{self.variant.prm_path}"')
        if scope:
            parts.append(f'scope="{scope}"')
        return "Bearer " + ", ".join(parts)


class _Gate:
    """The bearer check in front of /mcp: 401 without a valid token, 403 `insufficient_scope` for a tool the token's
    scopes do not cover, each with the variant's challenge."""

    def __init__(self, app: ASGIApp, server: VariantServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != "/mcp":
            await self.app(scope, receive, send)
        else:
            await body_first(self._checked, scope, receive, send)

    async def _checked(self, body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            rpc = json.loads(body) if body else {}
        except ValueError:
            rpc = {}
        method = rpc.get("method", "") if isinstance(rpc, dict) else ""
        headers = dict(scope["headers"])
        header = headers.get(b"authorization", b"").decode()
        token = await self.server.provider.load_access_token(header.removeprefix("Bearer ").strip())
        seen = self.server.seen
        if token is None:
            seen.rejected[method] += 1
            await _refuse(send, 401, self.server.challenge("invalid_token", self.server.variant.challenge_scope))
            return
        if method == "tools/call":
            needed = self.server.variant.needs.get(rpc.get("params", {}).get("name", ""))
            if needed is not None and needed not in token.scopes:
                seen.forbidden[needed] += 1
                wanted = " ".join(dict.fromkeys([*token.scopes, needed]))
                await _refuse(send, 403, self.server.challenge("insufficient_scope", wanted))
                return

        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, challenge: str) -> None:
    body = b'{"error":"unauthorized"}'
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", challenge.encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


@contextmanager
def serving(variant: Variant) -> Iterator[VariantServer]:
    server = VariantServer(variant)
    with served(server.app(), server.port):
        yield server
