"""The tracker demo server and its dev authorization server, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from elicithub.demo.launcher import Demo, start_demo
from tests.demo.conftest import REDIRECT_URI, OAuthFlow, call_tracker, query, stats

pytestmark = pytest.mark.anyio


async def mcp_status(demo: Demo, access_token: str | None) -> httpx.Response:
    headers = {"accept": "application/json, text/event-stream"}
    if access_token is not None:
        headers["authorization"] = f"Bearer {access_token}"
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(
            demo.tracker_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers
        )


async def test_call_without_token_is_401_with_resource_metadata_and_is_counted(
    demo: Demo, tracker_http: httpx.AsyncClient
) -> None:
    before = (await stats(tracker_http))["unauthenticated"]

    response = await mcp_status(demo, None)
    bogus = await mcp_status(demo, "not-a-token")

    assert response.status_code == 401
    assert bogus.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{demo.tracker_issuer}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert (await stats(tracker_http))["unauthenticated"] == before + 2


async def test_discovery_documents_are_served(demo: Demo, tracker_http: httpx.AsyncClient) -> None:
    resource = (await tracker_http.get("/.well-known/oauth-protected-resource/mcp")).json()
    server = (await tracker_http.get("/.well-known/oauth-authorization-server")).json()

    assert resource["resource"] == demo.tracker_url
    assert resource["authorization_servers"] == [demo.tracker_issuer]
    assert server["issuer"] == demo.tracker_issuer
    assert server["authorization_endpoint"] == f"{demo.tracker_issuer}/authorize"
    assert server["token_endpoint"] == f"{demo.tracker_issuer}/token"
    assert server["registration_endpoint"] == f"{demo.tracker_issuer}/register"
    assert server["revocation_endpoint"] == f"{demo.tracker_issuer}/revoke"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert "refresh_token" in server["grant_types_supported"]


async def test_authorization_code_flow_with_pkce_gives_a_token_that_lists_issues(
    demo: Demo, flow: OAuthFlow, tracker_http: httpx.AsyncClient
) -> None:
    await flow.register()
    consent_url = await flow.authorize(state="s-42")
    assert consent_url.startswith(f"{demo.tracker_issuer}/consent?")
    page = await tracker_http.get(consent_url)
    assert "Allow elicithub demo to read your issues?" in page.text
    assert page.headers["x-frame-options"] == "DENY"

    redirect = await flow.decide(consent_url, "allow")
    assert redirect["state"] == "s-42"
    tokens = (await flow.exchange(redirect["code"])).json()
    before = await stats(tracker_http)

    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 3600
    assert tokens["refresh_token"]
    text = await call_tracker(demo, tokens["access_token"], "list_issues")
    assert "Login page times out on slow networks" in text
    after = await stats(tracker_http)
    assert after["toolCalls"]["list_issues"] == before["toolCalls"].get("list_issues", 0) + 1
    assert after["unauthenticated"] == before["unauthenticated"]


async def test_consent_page_escapes_what_the_client_registered(
    flow: OAuthFlow, tracker_http: httpx.AsyncClient
) -> None:
    await flow.register(name='<script>alert("x")</script>')
    page = await tracker_http.get(await flow.authorize())

    assert "<script>" not in page.text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page.text


async def test_deny_redirects_with_access_denied_and_the_state(flow: OAuthFlow) -> None:
    await flow.register()
    redirect = await flow.decide(await flow.authorize(state="keep-me"), "deny")

    assert redirect["error"] == "access_denied"
    assert redirect["state"] == "keep-me"
    assert "code" not in redirect


async def test_consent_can_be_answered_only_once(flow: OAuthFlow, tracker_http: httpx.AsyncClient) -> None:
    await flow.register()
    consent_url = await flow.authorize()
    await flow.decide(consent_url, "allow")

    again = await tracker_http.post("/consent", data={"request": consent_url.split("request=")[1], "decision": "allow"})
    assert again.status_code == 400
    assert (await tracker_http.get(consent_url)).status_code == 400


async def test_wrong_code_verifier_is_refused(flow: OAuthFlow) -> None:
    await flow.register()
    redirect = await flow.decide(await flow.authorize(), "allow")

    response = await flow.exchange(redirect["code"], verifier="x" * 50)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


async def test_a_code_is_exchanged_only_once(flow: OAuthFlow) -> None:
    await flow.register()
    redirect = await flow.decide(await flow.authorize(), "allow")
    assert (await flow.exchange(redirect["code"])).status_code == 200

    second = await flow.exchange(redirect["code"])

    assert second.status_code == 400
    assert second.json()["error"] == "invalid_grant"


async def test_refresh_rotates_both_tokens(demo: Demo, flow: OAuthFlow) -> None:
    first = await flow.connect()

    response = await flow.token(grant_type="refresh_token", refresh_token=first["refresh_token"])

    assert response.status_code == 200, response.text
    second = response.json()
    assert second["access_token"] != first["access_token"]
    assert second["refresh_token"] != first["refresh_token"]
    assert "You have 3 issues" in await call_tracker(demo, second["access_token"], "list_issues")
    assert (await mcp_status(demo, first["access_token"])).status_code == 401
    reused = await flow.token(grant_type="refresh_token", refresh_token=first["refresh_token"])
    assert reused.json()["error"] == "invalid_grant"


async def test_an_expired_access_token_is_rejected_and_refresh_recovers() -> None:
    async with start_demo(token_ttl=0.3) as demo, httpx.AsyncClient(base_url=demo.tracker_issuer) as http:
        flow = OAuthFlow(http)
        tokens = await flow.connect()
        assert tokens["expires_in"] == 1
        # The token is refused once its 0.3 s are over, however long the machine took to get here (a call made
        # with it before then may or may not beat its expiry on a busy machine, so none is made).
        with anyio.fail_after(60):
            while (await mcp_status(demo, tokens["access_token"])).status_code != 401:  # noqa: ASYNC110 - expiry has no event
                await asyncio.sleep(0.05)
        # The refreshed token must outlive the several requests of the call below, however slow they are.
        demo.tracker.provider.token_ttl = 3600.0
        refreshed = (await flow.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"])).json()
        assert refreshed["expires_in"] == 3600
        assert "You have 3 issues" in await call_tracker(demo, refreshed["access_token"], "list_issues")


async def test_revoke_all_makes_every_token_fail(demo: Demo, flow: OAuthFlow, tracker_http: httpx.AsyncClient) -> None:
    tokens = await flow.connect()

    response = await tracker_http.post("/debug/revoke-all")

    assert response.json()["revoked"] >= 1
    assert (await mcp_status(demo, tokens["access_token"])).status_code == 401
    refreshed = await flow.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert refreshed.json()["error"] == "invalid_grant"


async def test_revocation_endpoint_ends_the_grant(demo: Demo, flow: OAuthFlow, tracker_http: httpx.AsyncClient) -> None:
    tokens = await flow.connect()
    client = flow.client

    response = await tracker_http.post(
        "/revoke",
        data={
            "token": tokens["access_token"],
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
        },
    )

    assert response.status_code == 200
    assert (await mcp_status(demo, tokens["access_token"])).status_code == 401
    refreshed = await flow.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert refreshed.json()["error"] == "invalid_grant"


async def test_each_person_who_connects_sees_only_their_own_issues(demo: Demo, tracker_http: httpx.AsyncClient) -> None:
    alice = await OAuthFlow(tracker_http).connect()
    bob = await OAuthFlow(tracker_http).connect()
    before = (await stats(tracker_http))["toolCalls"]

    created = await call_tracker(demo, alice["access_token"], "create_issue", {"title": "Alice's bug", "body": "b"})

    assert created == "Created issue #4: Alice's bug"
    assert "Alice's bug" in await call_tracker(demo, alice["access_token"], "list_issues")
    assert "Alice's bug" not in await call_tracker(demo, bob["access_token"], "list_issues")
    after = (await stats(tracker_http))["toolCalls"]
    assert after["create_issue"] == before.get("create_issue", 0) + 1
    assert after["list_issues"] == before.get("list_issues", 0) + 2


class MemoryTokens:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdk_oauth_client_discovers_and_connects(demo: Demo, tracker_http: httpx.AsyncClient) -> None:
    redirects: list[dict[str, str]] = []

    async def press_allow(authorization_url: str) -> None:
        consent = await tracker_http.get(authorization_url, follow_redirects=True)
        answer = {"request": query(str(consent.url))["request"], "decision": "allow"}
        redirects.append(query((await tracker_http.post("/consent", data=answer)).headers["location"]))

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirects[-1]["code"], state=redirects[-1]["state"])

    storage = MemoryTokens()
    auth = OAuthClientProvider(
        demo.tracker_url,
        OAuthClientMetadata(redirect_uris=[AnyUrl(REDIRECT_URI)], client_name="sdk client"),
        storage,
        redirect_handler=press_allow,
        callback_handler=callback,
    )
    async with (
        httpx2.AsyncClient(auth=auth, timeout=10) as http,
        Client(streamable_http_client(demo.tracker_url, http_client=http)) as client,
    ):
        result = await client.call_tool("list_issues", {})

    assert not result.is_error
    assert storage.tokens is not None and storage.tokens.refresh_token
    assert storage.client is not None and storage.client.client_name == "sdk client"
