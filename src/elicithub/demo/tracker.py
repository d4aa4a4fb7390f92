"""The `tracker` demo MCP server: per-user issues behind the dev OAuth provider, with counters for tests."""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicithub.demo.addresses import base_url
from elicithub.demo.oauth import CONSENT_PATH, SCOPE, DemoOAuthProvider
from elicithub.surfaces import body_first

MCP_PATH = "/mcp"
_SEED = (
    ("Login page times out on slow networks", "Reported by three customers on mobile."),
    ("Export to CSV drops the last row", "Happens when the table has more than 1000 rows."),
    ("Dark mode: unreadable links in settings", ""),
)


@dataclass
class Issue:
    number: int
    title: str
    body: str
    state: str = "open"


@dataclass
class TrackerStats:
    """What tests count: requests to /mcp refused for lack of a valid token (an `initialize` refused so counts as a
    probe: clients send one to read the challenge), and successful tool calls."""

    unauthenticated: int = 0
    probes: int = 0
    tool_calls: Counter[str] = field(default_factory=Counter)

    def as_json(self) -> dict[str, object]:
        return {"unauthenticated": self.unauthenticated, "probes": self.probes, "toolCalls": dict(self.tool_calls)}


class Tracker:
    """The tracker demo: its OAuth provider, everyone's issues, its counters, and one ASGI app serving all of it.

    `base_url` is where the app will be reachable (e.g. http://127.0.0.1:9101); it is both the
    authorization server's issuer and the base of the protected resource `{base_url}/mcp`.
    """

    def __init__(self, base_url: str, *, token_ttl: float = 3600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + MCP_PATH
        self.provider = DemoOAuthProvider(self.base_url, token_ttl=token_ttl)
        self.stats = TrackerStats()
        self.issues: dict[str, list[Issue]] = {}
        self.server = self._build_server()
        self.app: ASGIApp = _CountRejections(self._build_app(), self.stats)

    def issues_of(self, owner: str) -> list[Issue]:
        if owner not in self.issues:
            self.issues[owner] = [Issue(n, title, body) for n, (title, body) in enumerate(_SEED, start=1)]
        return self.issues[owner]

    def _build_server(self) -> MCPServer:
        # Strings, not AnyHttpUrl objects: AuthSettings keeps a path-less issuer without a trailing slash only when
        # it parses the string itself, and RFC 8414 compares issuers as exact strings.
        auth = AuthSettings.model_validate(
            {
                "issuer_url": self.base_url,
                "resource_server_url": self.url,
                "client_registration_options": ClientRegistrationOptions(
                    enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
                ),
                "revocation_options": RevocationOptions(enabled=True),
                "required_scopes": [SCOPE],
                # A dev server: accept tokens whether or not the client sent an RFC 8707 resource indicator.
                "validate_token_resource": False,
            }
        )
        server: MCPServer = MCPServer(
            "tracker",
            instructions="A demo issue tracker. Each signed-in person sees only their own issues.",
            auth_server_provider=self.provider,
            auth=auth,
            log_level="WARNING",
        )

        @server.tool(structured_output=False)
        async def list_issues() -> str:
            """List your issues in the tracker."""
            issues = self.issues_of(_owner())
            self.stats.tool_calls["list_issues"] += 1
            lines = [f"#{i.number} [{i.state}] {i.title}" for i in issues]
            return f"You have {len(issues)} issues:\n" + "\n".join(lines) if issues else "You have no issues."

        @server.tool(structured_output=False)
        async def create_issue(title: str, body: str = "") -> str:
            """Create an issue in your tracker."""
            if not title.strip():
                raise ToolError("An issue needs a title.")
            issues = self.issues_of(_owner())
            issue = Issue(max((i.number for i in issues), default=0) + 1, title.strip(), body)
            issues.append(issue)
            self.stats.tool_calls["create_issue"] += 1
            return f"Created issue #{issue.number}: {issue.title}"

        return server

    def _build_app(self) -> ASGIApp:
        async def stats(request: Request) -> Response:
            return JSONResponse(self.stats.as_json())

        async def revoke_all(request: Request) -> Response:
            return JSONResponse({"revoked": self.provider.revoke_all()})

        self.server.custom_route(CONSENT_PATH, methods=["GET", "POST"])(self.provider.consent_page)
        # Debug routes are unauthenticated on purpose: the demo binds to loopback only.
        self.server.custom_route("/debug/stats", methods=["GET"])(stats)
        self.server.custom_route("/debug/revoke-all", methods=["POST"])(revoke_all)
        return self.server.streamable_http_app(
            streamable_http_path=MCP_PATH, host=urlsplit(self.base_url).hostname or "127.0.0.1"
        )


def _owner() -> str:
    token = get_access_token()
    if token is None:
        # The bearer middleware guarantees a token on /mcp; reaching here means the app was wired wrongly.
        raise ToolError("No access token on this request.")
    return token.subject or token.client_id


class _CountRejections:
    """ASGI wrapper counting 401 responses on the MCP endpoint, telling `initialize` probes apart."""

    def __init__(self, app: ASGIApp, stats: TrackerStats) -> None:
        self.app = app
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        # The bearer check answers before anything reads the body, so read it first (requests here are small).
        await body_first(self._counted, scope, receive, send)

    async def _counted(self, body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        probe = b'"initialize"' in body

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                if probe:
                    self.stats.probes += 1
                else:
                    self.stats.unauthenticated += 1
            await send(message)

        await self.app(scope, receive, counting_send)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m elicithub.demo.tracker", description=__doc__)
    parser.add_argument("port", type=int, help="port to listen on")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--token-ttl", type=float, default=3600.0, metavar="SECONDS", help="access token lifetime")
    args = parser.parse_args(argv)
    tracker = Tracker(base_url(args.host, args.port), token_ttl=args.token_ttl)
    uvicorn.run(tracker.app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
