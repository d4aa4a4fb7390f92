"""Microsoft's Teams SDK (`microsoft-teams-apps`) served by the hub: its app, on a route of the hub's own app, with
the bot's token fetched here.

The SDK verifies every incoming activity's JWT (RS256 from the keys beside `openid_metadata_url`, `iss`, `aud` = the
app id, `serviceurl` = the activity's `serviceUrl`) before any handler of ours runs; a bad or missing one is 401. Its
token manager would fetch the bot's token with MSAL, which takes only Microsoft's own login servers, so the hub fetches
it by client credentials at `login_url` itself and hands it over through the SDK's token callable.

The SDK fetches the keys with PyJWT's blocking client, on the event loop that serves the request: at the first
activity, and again when its copy of them (kept five minutes) runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
from microsoft_teams.api.auth.cloud_environment import PUBLIC, with_overrides
from microsoft_teams.apps import App
from microsoft_teams.apps.http.adapter import HttpMethod, HttpRequest, HttpRouteHandler
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from elicithub.config import TeamsConfig
from elicithub.errors import TeamsUnusable

MESSAGING_ENDPOINT = "/teams/api/messages"

REFRESH_BEFORE_S = 300.0
"""A token is fetched anew this long before it expires (Entra's last an hour or more)."""

_SDK_ENVIRONMENT = (
    "CLIENT_ID",
    "CLIENT_SECRET",
    "TENANT_ID",
    "MANAGED_IDENTITY_CLIENT_ID",
    "SERVICE_URL",
    "CLOUD",
    "DANGEROUSLY_ALLOW_UNAUTHENTICATED_REQUESTS",
)
"""What the SDK's app reads from the environment when made; the hub's config says all of it (a `CLIENT_SECRET`
would make the SDK use MSAL instead of the hub's token)."""


def secret(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise TeamsUnusable(f"teams: ${name} is not set; it must hold the Teams bot's app id or secret.")
    return value


class BotToken:
    """The bot's access token to the Bot Connector, by client credentials at the tenant's token endpoint; kept until
    shortly before it expires, and fetched by one caller at a time."""

    def __init__(self, http: httpx.AsyncClient, login_url: str, tenant_id: str, app_id: str, password: str) -> None:
        self.http = http
        self.url = f"{login_url.rstrip('/')}/{tenant_id}/oauth2/v2.0/token"
        self.app_id = app_id
        self.password = password
        self._tokens: dict[str, tuple[str, float]] = {}  # scope -> (token, when to fetch anew)
        self._lock = asyncio.Lock()

    async def __call__(self, scope: str | list[str], tenant_id: str | None = None) -> str:
        """The SDK's token callable: a token for `scope` (the Bot Framework's, `https://api.botframework.com/.default`).
        The tenant is the config's: the bot's app is registered there."""
        wanted = " ".join(scope) if isinstance(scope, list) else scope
        async with self._lock:
            kept = self._tokens.get(wanted)
            if kept is not None and time.monotonic() < kept[1]:
                return kept[0]
            form = {
                "grant_type": "client_credentials",
                "client_id": self.app_id,
                "client_secret": self.password,
                "scope": wanted,
            }
            response = await self.http.post(self.url, data=form)
            if response.status_code != 200:
                raise TeamsUnusable(f"teams: the token endpoint {self.url} refused the bot ({response.status_code})")
            body = response.json()
            lifetime = float(body.get("expires_in") or 0)
            token = str(body["access_token"])
            self._tokens[wanted] = (token, time.monotonic() + max(0.0, lifetime - REFRESH_BEFORE_S))
            return token


class HubRoute:
    """The SDK's HTTP adapter for an app served by the hub: it keeps the one route the SDK registers (the messaging
    endpoint) and serves it as the endpoint of a route of the hub's app."""

    def __init__(self) -> None:
        self._handler: HttpRouteHandler | None = None

    def register_route(self, method: HttpMethod, path: str, handler: HttpRouteHandler) -> None:
        if (method, path) != ("POST", MESSAGING_ENDPOINT):
            raise ValueError(f"the hub serves only POST {MESSAGING_ENDPOINT}, not {method} {path}")
        self._handler = handler

    def serve_static(self, path: str, directory: str) -> None:
        raise ValueError("the hub serves no static files for the Teams app")

    async def start(self, port: int) -> None:
        raise ValueError("the hub's own server serves the Teams app")

    async def stop(self) -> None:
        return None

    async def endpoint(self, request: Request) -> Response:
        if self._handler is None:
            return JSONResponse({"error": "not ready"}, status_code=503)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return JSONResponse({"error": "an activity is a JSON object"}, status_code=400)
        result = await self._handler(HttpRequest(body=body, headers=dict(request.headers)))
        if result["body"] is None:
            return Response(status_code=result["status"])
        return JSONResponse(result["body"], status_code=result["status"])


@contextlib.contextmanager
def _sdk_environment_hidden() -> Iterator[None]:
    hidden = {name: os.environ.pop(name) for name in _SDK_ENVIRONMENT if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(hidden)


def build_app(config: TeamsConfig, token: BotToken, route: HubRoute) -> App:
    """The SDK's app with the bot's identity and the hub's token, verifying activities against the config's OpenID
    keys; its routes are registered (on `route`) by `await app.initialize()`."""
    cloud = with_overrides(
        PUBLIC, openid_metadata_url=config.openid_metadata_url, login_endpoint=config.login_url.rstrip("/")
    )
    options: dict[str, Any] = {
        "client_id": token.app_id,
        "tenant_id": config.tenant_id,
        "token": token,
        "cloud": cloud,
        "http_server_adapter": route,
        "messaging_endpoint": MESSAGING_ENDPOINT,
        "dangerously_allow_unauthenticated_requests": False,
        "fetch_user_token": False,  # the hub has its own sign-ins; no user token is looked up per activity
        "state": False,
    }
    if config.service_url is not None:
        options["service_url"] = config.service_url
    with _sdk_environment_hidden():
        return App(**options)
