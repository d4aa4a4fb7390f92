"""JWTs from the company's OpenID provider name hub users on every surface; a bad one is a 401 with the challenge,
and nothing runs."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from elicithub.clients.hub import HubClient, Text
from tests.auth.oidc_provider import OidcProvider, forged_hs256
from tests.conftest import HubFactory, RunningHub, sse_data
from tests.server.test_chat_ui_stream import text_part, ui_body
from tests.surfaces.mcp.test_server import text

A2A = {"A2A-Version": "1.0"}


def jwt_client(hub: RunningHub, token: str) -> httpx.Client:
    headers = {"authorization": f"Bearer {token}", "x-supports-elicitation": "true"}
    return httpx.Client(base_url=hub.url, headers=headers, timeout=30)


def chat(client: httpx.Client, conversation_id: str, message: str) -> tuple[int, list[dict[str, Any]]]:
    with client.stream("POST", "/run/api/chat", json=ui_body(conversation_id, text_part(message))) as response:
        return response.status_code, list(sse_data(response)) if response.status_code == 200 else []


def a2a_send(hub: RunningHub, token: str, text_: str) -> httpx.Response:
    message = {"role": "ROLE_USER", "parts": [{"text": text_}], "messageId": str(uuid.uuid4())}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return httpx.post(f"{hub.url}/a2a", json=body, headers={**A2A, "authorization": f"Bearer {token}"}, timeout=30)


def agui_run(hub: RunningHub, token: str, thread_id: str) -> httpx.Response:
    body = {"threadId": thread_id, "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "hello"}]}
    return httpx.post(f"{hub.url}/run/agui", json=body, headers={"authorization": f"Bearer {token}"}, timeout=30)


async def mcp_call(hub: RunningHub, token: str, message: str) -> str:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(f"{hub.url}/mcp", http_client=http)) as client:
        return text(await client.call_tool("assistant", {"message": message}))


def test_a_valid_jwt_names_the_user_on_every_surface(oidc_hub: RunningHub, oidc: OidcProvider) -> None:
    token = oidc.provider.mint("alice")
    with jwt_client(oidc_hub, token) as client:
        assert client.get("/run/api/me").json() == {"user": "alice"}
        status, parts = chat(client, "chat-oidc-1", "hello")
        assert status == 200 and parts[-1]["type"] == "finish"
        transcript = client.get("/run/api/conversations/chat-oidc-1").json()
        assert transcript["messages"][0] == {"role": "user", "text": "hello"}
        body = {"messages": [{"role": "user", "content": "hello"}], "stream": True}
        with client.stream("POST", "/run/v1/chat/completions", json=body) as completions:
            assert completions.status_code == 200 and list(sse_data(completions))
    # A JWT of alice is the static user alice: the same person, whichever way they signed in.
    with oidc_hub.client("alice") as static:
        assert static.get("/run/api/conversations/chat-oidc-1").status_code == 200
    assert "Available tools" in asyncio.run(mcp_call(oidc_hub, token, "hello"))
    answered = a2a_send(oidc_hub, token, "hello").json()
    assert "result" in answered, answered
    agui = agui_run(oidc_hub, token, "agui-oidc-1")
    assert agui.status_code == 200 and '"type":"RUN_FINISHED"' in agui.text


def test_a_jwt_answers_its_own_question(oidc_hub: RunningHub, oidc: OidcProvider) -> None:
    with jwt_client(oidc_hub, oidc.provider.mint("alice")) as client:
        body = ui_body("chat-oidc-2", text_part('/call mrtr.provision {"name": "orders"}'))
        with client.stream("POST", "/run/api/chat", json=body) as stream:
            parts = sse_data(stream)
            request = next(p for p in parts if p["type"] == "data-elicitation-request")["data"]
            answer = {
                "conversationId": "chat-oidc-2",
                "elicitationId": request["elicitationId"],
                "action": "accept",
                "content": {"region": "eu-west-1"},
            }
            assert client.post("/run/api/elicitation-responses", json=answer).status_code == 200
            assert "eu-west-1" in "".join(p.get("delta", "") for p in parts)


def test_alices_jwt_never_reaches_bobs_conversations_questions_or_tasks(
    oidc_hub: RunningHub, oidc: OidcProvider
) -> None:
    with oidc_hub.client("bob") as bob:
        body = ui_body("chat-bob-1", text_part('/call mrtr.provision {"name": "orders"}'))
        with bob.stream("POST", "/run/api/chat", json=body) as stream:
            request = next(p for p in sse_data(stream) if p["type"] == "data-elicitation-request")["data"]
            with jwt_client(oidc_hub, oidc.provider.mint("alice")) as alice:
                assert alice.get("/run/api/conversations/chat-bob-1").status_code == 404
                answer = {
                    "conversationId": "chat-bob-1",
                    "elicitationId": request["elicitationId"],
                    "action": "decline",
                }
                assert alice.post("/run/api/elicitation-responses", json=answer).status_code == 404
                # Alice writing to Bob's conversation id gets a conversation of her own, not Bob's transcript.
                status, _ = chat(alice, "chat-bob-1", "hello")
                assert status == 200
                assert "orders" not in alice.get("/run/api/conversations/chat-bob-1").text
            bob.post("/run/api/elicitation-responses", json={**answer, "action": "decline"})
    bobs_task = a2a_send(oidc_hub, "bob-secret-1", "hello").json()["result"]["task"]["id"]
    get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": bobs_task}}
    headers = {**A2A, "authorization": f"Bearer {oidc.provider.mint('alice')}"}
    assert "error" in httpx.post(f"{oidc_hub.url}/a2a", json=get, headers=headers).json()  # not Alice's task
    headers = {**A2A, "authorization": "Bearer bob-secret-1"}
    assert httpx.post(f"{oidc_hub.url}/a2a", json=get, headers=headers).json()["result"]["id"] == bobs_task


def _bad_tokens(oidc: OidcProvider) -> dict[str, str]:
    p = oidc.provider
    now = int(time.time())
    signer = p.keys[-1]
    payload = p.mint("alice").split(".")[1]
    return {
        "wrong issuer": p.mint(iss="https://login.elsewhere.example"),
        "wrong audience": p.mint(aud="someone-else"),
        "expired": p.mint(iat=now - 900, exp=now - 600),
        "not yet valid": p.mint(nbf=now + 600),
        "no expiry": p.mint(exp=None),
        "alg none": "eyJhbGciOiJub25lIiwia2lkIjoiazIifQ." + payload + ".",
        "HS256 with the public key": forged_hs256(p.mint(), signer),
        "another resource": p.mint(aud="https://tools.elsewhere.example/mcp"),
        "not a jwt": "alice-secret-but-not-quite",
    }


BAD = [
    "wrong issuer",
    "wrong audience",
    "expired",
    "not yet valid",
    "no expiry",
    "alg none",
    "HS256 with the public key",
    "another resource",
    "not a jwt",
]


@pytest.mark.parametrize("case", BAD)
def test_a_bad_jwt_is_401_with_the_challenge_and_nothing_runs(
    oidc_hub: RunningHub, oidc: OidcProvider, case: str
) -> None:
    token = _bad_tokens(oidc)[case]
    metadata = f"{oidc_hub.url}/.well-known/oauth-protected-resource"
    with jwt_client(oidc_hub, token) as client:
        status, _ = chat(client, f"chat-bad-{BAD.index(case)}", "hello")
        assert status == 401
        me = client.get("/run/api/me")
        assert me.status_code == 401 and f'resource_metadata="{metadata}"' in me.headers["www-authenticate"]
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "assistant", "arguments": {}}}
    mcp = httpx.post(f"{oidc_hub.url}/mcp", json=rpc, headers={"authorization": f"Bearer {token}"})
    assert mcp.status_code == 401
    challenge = mcp.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge and f'resource_metadata="{metadata}/mcp"' in challenge
    assert 'scope="openid profile email"' in challenge
    assert a2a_send(oidc_hub, token, "hello").status_code == 401
    agui = agui_run(oidc_hub, token, f"agui-bad-{BAD.index(case)}")
    assert agui.status_code == 401 and 'error="invalid_token"' in agui.headers["www-authenticate"]
    with oidc_hub.client("alice") as alice:  # alice's JWTs would have made this conversation hers
        assert alice.get(f"/run/api/conversations/chat-bad-{BAD.index(case)}").status_code == 404


def test_a_rotated_in_key_is_fetched_at_once(oidc_hub: RunningHub, oidc: OidcProvider) -> None:
    fetched = oidc.provider.seen.jwks_fetches
    oidc.provider.rotate()
    with jwt_client(oidc_hub, oidc.provider.mint("alice")) as client:
        assert client.get("/run/api/me").json() == {"user": "alice"}
        assert client.get("/run/api/me").json() == {"user": "alice"}
    assert oidc.provider.seen.jwks_fetches == fetched + 1  # once for the new kid, not per request


def test_an_unknown_kid_refetches_once_then_is_refused(oidc_hub: RunningHub, oidc: OidcProvider) -> None:
    fetched = oidc.provider.seen.jwks_fetches
    stranger = oidc.provider.rotate()
    oidc.provider.keys = oidc.provider.keys[:-1]  # a key the provider never publishes
    forged = oidc.provider.mint("alice", key=stranger)
    for _ in range(3):
        with jwt_client(oidc_hub, forged) as client:
            assert client.get("/run/api/me").status_code == 401
    assert oidc.provider.seen.jwks_fetches == fetched + 1


def test_with_the_provider_out_of_reach_static_users_work_and_jwts_get_503(
    make_hub: HubFactory, oidc: OidcProvider
) -> None:
    oidc.provider.jwks_down = True
    hub = make_hub(auth={"oidc": oidc.config()})
    with hub.client("alice") as static:
        assert static.get("/run/api/me").json() == {"user": "alice"}
    token = oidc.provider.mint("alice")
    with jwt_client(hub, token) as client:
        refused = client.get("/run/api/me")
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "identity_unavailable"
    assert "could not be fetched" in refused.json()["error"]["message"]
    mcp = httpx.post(f"{hub.url}/mcp", json={}, headers={"authorization": f"Bearer {token}"})
    assert mcp.status_code == 503 and mcp.json()["error"]["code"] == "identity_unavailable"
    agui = agui_run(hub, token, "agui-down")
    assert agui.status_code == 503 and agui.json()["error"]["code"] == "identity_unavailable"
    oidc.provider.jwks_down = False  # back: the next token fetches the keys and works
    with jwt_client(hub, token) as client:
        assert client.get("/run/api/me").json() == {"user": "alice"}


def test_the_user_is_the_configured_claim(make_hub: HubFactory, oidc: OidcProvider) -> None:
    hub = make_hub(auth={"oidc": oidc.config(user_claim="email")})
    with jwt_client(hub, oidc.provider.mint("u-123", email="carol@example.com")) as client:
        assert client.get("/run/api/me").json() == {"user": "carol@example.com"}
    with jwt_client(hub, oidc.provider.mint("u-123")) as client:
        assert client.get("/run/api/me").status_code == 401  # no such claim: no user


def test_hub_client_takes_its_token_from_the_environment(
    oidc_hub: RunningHub, oidc: OidcProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELICITHUB_TOKEN", oidc.provider.mint("alice"))

    async def go() -> list[object]:
        async with HubClient(oidc_hub.url) as client:
            return [e async for e in client.chat("hello", conversation_id="chat-env-1")]

    assert any(isinstance(e, Text) for e in asyncio.run(go()))
    with oidc_hub.client("alice") as alice:
        assert alice.get("/run/api/conversations/chat-env-1").status_code == 200
