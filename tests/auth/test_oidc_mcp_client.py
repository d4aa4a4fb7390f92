"""The hub's /mcp as an OAuth protected resource: its metadata names the OpenID provider, a 401 points at it, and
the official SDK's OAuth client signs in there and calls the hub's agent with no hub-specific code."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from pydantic import AnyUrl

from tests.auth.oidc_provider import OidcProvider
from tests.conftest import RunningHub
from tests.demo.test_tracker import MemoryTokens
from tests.surfaces.mcp.test_server import text

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never opened: the test reads the code off the redirect


def test_the_metadata_names_the_provider_for_the_hub_and_its_mcp_endpoint(
    oidc_hub: RunningHub, oidc: OidcProvider
) -> None:
    mcp = httpx.get(f"{oidc_hub.url}/.well-known/oauth-protected-resource/mcp").json()
    assert mcp["resource"] == f"{oidc_hub.url}/mcp"
    assert mcp["authorization_servers"] == [oidc.base]
    assert mcp["scopes_supported"] == ["openid", "profile", "email"]
    assert mcp["bearer_methods_supported"] == ["header"]
    hub = httpx.get(f"{oidc_hub.url}/.well-known/oauth-protected-resource").json()
    assert hub["resource"] == oidc_hub.url and hub["authorization_servers"] == [oidc.base]


def test_without_a_provider_there_is_no_metadata_and_a_plain_challenge(hub: RunningHub) -> None:
    assert httpx.get(f"{hub.url}/.well-known/oauth-protected-resource/mcp").status_code == 404
    response = httpx.post(f"{hub.url}/mcp", json={})
    assert response.status_code == 401 and response.headers["www-authenticate"] == 'Bearer realm="elicithub"'


def test_a_401_on_mcp_points_at_its_metadata_and_scopes(oidc_hub: RunningHub) -> None:
    response = httpx.post(f"{oidc_hub.url}/mcp", json={})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        'Bearer realm="elicithub", '
        f'resource_metadata="{oidc_hub.url}/.well-known/oauth-protected-resource/mcp", '
        'scope="openid profile email"'
    )


def test_the_sdks_oauth_client_signs_in_at_the_provider_and_calls_the_agent(
    oidc_hub: RunningHub, oidc: OidcProvider
) -> None:
    redirects: list[dict[str, str]] = []

    async def sign_in_as_alice(authorization_url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=True, timeout=10) as browser:
            login = await browser.get(authorization_url)
            assert "Sign in to the test provider" in login.text
            request_id = parse_qs(urlsplit(str(login.url)).query)["request"][0]
            done = await browser.post(
                f"{oidc.base}/login", data={"request": request_id, "username": "alice"}, follow_redirects=False
            )
        redirects.append({k: v[0] for k, v in parse_qs(urlsplit(done.headers["location"]).query).items()})

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirects[-1]["code"], state=redirects[-1]["state"])

    storage = MemoryTokens()
    auth = OAuthClientProvider(
        f"{oidc_hub.url}/mcp",
        OAuthClientMetadata(redirect_uris=[AnyUrl(REDIRECT_URI)], client_name="an MCP client"),
        storage,
        redirect_handler=sign_in_as_alice,
        callback_handler=callback,
    )

    async def go() -> str:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=30) as http,
            Client(streamable_http_client(f"{oidc_hub.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("assistant", {"message": "hello", "conversationId": "chat-sdk-1"})
            return text(result)

    assert "Available tools" in asyncio.run(go())
    assert oidc.provider.seen.authorize_resources == [f"{oidc_hub.url}/mcp"]  # RFC 8707: the token is for /mcp
    assert storage.tokens is not None
    with oidc_hub.client("alice") as alice:  # the provider's alice is the hub's alice
        assert alice.get("/run/api/conversations/chat-sdk-1").status_code == 200


def test_the_agent_card_declares_the_provider(oidc_hub: RunningHub, oidc: OidcProvider) -> None:
    card = httpx.get(f"{oidc_hub.url}/.well-known/agent-card.json").json()
    scheme = card["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]
    assert scheme["openIdConnectUrl"] == f"{oidc.base}/.well-known/openid-configuration"
    assert {"schemes": {"oidc": {}}} in card["securityRequirements"]
