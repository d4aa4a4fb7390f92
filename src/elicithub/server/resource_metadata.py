"""The hub as an OAuth protected resource (RFC 9728): its metadata documents and the 401 challenge that names them.

With `auth.oidc` the hub, and its `/mcp` in particular, tells a client which authorization server issues its
tokens, so an MCP client that knows nothing of the hub can sign in; without it the challenge is a bare `Bearer`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from elicithub.config import OidcConfig

WELL_KNOWN = "/.well-known/oauth-protected-resource"
PROTECTED_PATHS = ("", "/mcp")
"""The hub as a whole (chat, answers, `/a2a`) and its MCP endpoint, each a resource with its own document."""


class ProtectedResource:
    def __init__(self, public_url: str, oidc: OidcConfig | None) -> None:
        self.base = public_url.rstrip("/")
        self.oidc = oidc

    def url(self, path: str = "") -> str:
        """The resource identifier of `path` (one of `PROTECTED_PATHS`): what a token's `aud` may name."""
        return self.base + path

    @property
    def audiences(self) -> list[str]:
        return [self.url(p) for p in PROTECTED_PATHS]

    def metadata(self, path: str) -> dict[str, Any]:
        assert self.oidc is not None
        return {
            "resource": self.url(path),
            "authorization_servers": [self.oidc.issuer],
            "scopes_supported": self.oidc.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "elicithub" + (" MCP server" if path == "/mcp" else ""),
        }

    def challenge(self, path: str = "", *, invalid_token: bool) -> str:
        """The `WWW-Authenticate` value of a 401 on `path`: where its metadata is, and which scopes to ask for."""
        parts = ['realm="elicithub"']
        if invalid_token:
            parts.append('error="invalid_token"')
        if self.oidc is not None:
            parts.append(f'resource_metadata="{self.base}{WELL_KNOWN}{path}"')
            parts.append(f'scope="{" ".join(self.oidc.scopes)}"')
        return "Bearer " + ", ".join(parts)

    @property
    def routes(self) -> list[BaseRoute]:
        """The metadata documents, served only when there is an authorization server to name."""
        if self.oidc is None:
            return []
        return [Route(WELL_KNOWN + path, self._document(path), methods=["GET"]) for path in PROTECTED_PATHS]

    def _document(self, path: str) -> Any:
        async def document(_: Request) -> Response:
            return JSONResponse(self.metadata(path), headers={"cache-control": "public, max-age=300"})

        return document
