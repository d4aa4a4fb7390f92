"""Fixtures for the demo servers: the three servers started in the test's event loop, and an OAuth client driver."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from elicithub.demo.launcher import Demo, start_demo

REDIRECT_URI = "http://127.0.0.1:9/callback"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    # Module scope lets one set of demo servers (one event loop) serve a whole test module.
    return "asyncio"


@pytest.fixture(scope="module")
async def demo() -> AsyncIterator[Demo]:
    async with start_demo() as running:
        yield running


async def stats(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.get("/debug/stats")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


class OAuthFlow:
    """Drives the tracker's authorization server the way a browser and an OAuth client would, with plain httpx."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.client: dict[str, Any] = {}
        self.verifier = secrets.token_urlsafe(48)

    async def register(self, name: str = "elicithub test") -> dict[str, Any]:
        response = await self.http.post("/register", json={"redirect_uris": [REDIRECT_URI], "client_name": name})
        assert response.status_code == 201, response.text
        self.client = response.json()
        return self.client

    async def authorize(self, state: str = "state-123") -> str:
        """GET /authorize with PKCE S256; returns the consent page URL it redirects to."""
        challenge = base64.urlsafe_b64encode(hashlib.sha256(self.verifier.encode()).digest()).decode().rstrip("=")
        params = {
            "response_type": "code",
            "client_id": self.client["client_id"],
            "redirect_uri": REDIRECT_URI,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
        }
        response = await self.http.get("/authorize", params=params)
        assert response.status_code == 302, response.text
        return response.headers["location"]

    async def decide(self, consent_url: str, decision: str) -> dict[str, str]:
        """Answer the consent page; returns the query of the redirect back to the client."""
        page = await self.http.get(consent_url)
        assert page.status_code == 200
        response = await self.http.post(
            "/consent", data={"request": query(consent_url)["request"], "decision": decision}
        )
        assert response.status_code == 302
        location = response.headers["location"]
        assert location.startswith(REDIRECT_URI + "?")
        return query(location)

    async def token(self, **form: str) -> httpx.Response:
        data = {"client_id": self.client["client_id"], "client_secret": self.client["client_secret"], **form}
        return await self.http.post("/token", data=data)

    async def exchange(self, code: str, verifier: str | None = None) -> httpx.Response:
        return await self.token(
            grant_type="authorization_code",
            code=code,
            redirect_uri=REDIRECT_URI,
            code_verifier=verifier or self.verifier,
        )

    async def connect(self) -> dict[str, Any]:
        """The whole flow: register, authorize, Allow, exchange; returns the token response."""
        await self.register()
        redirect = await self.decide(await self.authorize(), "allow")
        response = await self.exchange(redirect["code"])
        assert response.status_code == 200, response.text
        tokens: dict[str, Any] = response.json()
        return tokens


@pytest.fixture
async def tracker_http(demo: Demo) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=demo.tracker_issuer, timeout=10) as http:
        yield http


@pytest.fixture
def flow(tracker_http: httpx.AsyncClient) -> OAuthFlow:
    return OAuthFlow(tracker_http)


async def call_tracker(demo: Demo, access_token: str, tool: str, arguments: dict[str, Any] | None = None) -> str:
    """Call a tracker tool through the official SDK client with a bearer token; returns the text."""
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {access_token}"}, timeout=10) as http,
        Client(streamable_http_client(demo.tracker_url, http_client=http)) as client,
    ):
        result = await client.call_tool(tool, arguments or {})
    assert not result.is_error, result
    return "\n".join(block.text for block in result.content if isinstance(block, mt.TextContent))
