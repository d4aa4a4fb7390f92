"""The hub's agents as an MCP server, called with the official SDK Client in both protocol eras."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

import elicithub
from tests.conftest import USERS, HubAddress, RunningHub
from tests.servers.mrtr_server import REGION

PROVISION = '/call mrtr.provision {"name": "orders"}'
LEGACY = '/call legacy.provision {"name": "orders"}'


def token(user: str) -> str:
    return next(u["token"] for u in USERS if u["id"] == user)


@asynccontextmanager
async def connected(
    hub: HubAddress, mode: str, user: str = "alice", answer: Any = None, **kw: Any
) -> AsyncIterator[tuple[Client, list[mt.ElicitRequestParams]]]:
    """An SDK Client on the hub's /mcp; its elicitation callback records each question and answers `answer`."""
    asked: list[mt.ElicitRequestParams] = []

    async def on_elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params)
        return answer if answer is not None else mt.ElicitResult(action="accept", content={"region": "eu-west-1"})

    http = create_mcp_http_client(headers={"authorization": f"Bearer {token(user)}"})
    transport = streamable_http_client(f"{hub.url}/mcp", http_client=http)
    callback = kw.pop("elicitation_callback", on_elicit)
    async with http, Client(transport, mode=mode, elicitation_callback=callback, **kw) as client:
        yield client, asked


def text(result: mt.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, mt.TextContent))


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
@pytest.mark.parametrize("message", [PROVISION, LEGACY], ids=["mrtr-downstream", "legacy-downstream"])
def test_a_client_of_either_era_answers_the_agents_question_and_gets_the_result(
    hub: RunningHub, mode: str, message: str
) -> None:
    async def go() -> None:
        async with connected(hub, mode) as (client, asked):
            tools = await client.list_tools()
            assert tools.tools[0].name == "assistant"  # the agents first, then the downstream tools
            assert tools.tools[0].description
            result = await client.call_tool("assistant", {"message": message})
        assert text(result) == "Provisioned orders in eu-west-1." and not result.is_error
        assert [p.message for p in asked] == ["Which region should orders live in?"]
        assert isinstance(asked[0], mt.ElicitRequestFormParams)
        conversation = (result.structured_content or {})["conversationId"]
        # The conversation is the hub's like any other: its owner can read it.
        with hub.client() as chat:
            messages = chat.get(f"/run/api/conversations/{conversation}").json()["messages"]
        assert messages[-1] == {"role": "assistant", "text": "Provisioned orders in eu-west-1."}

    asyncio.run(go())


def test_the_server_names_itself_with_the_package_version_in_both_eras(hub: RunningHub) -> None:
    async def go() -> None:
        async with connected(hub, "legacy") as (client, _):
            info = client.server_info  # from initialize
        assert info is not None and (info.name, info.version) == ("elicithub", elicithub.__version__)
        async with connected(hub, "2026-07-28") as (client, _):
            listed = await client.list_tools()
        stamp = (listed.meta or {})[mt.SERVER_INFO_META_KEY]  # on every 2026-07-28 result
        assert (stamp["name"], stamp["version"]) == ("elicithub", elicithub.__version__)
        assert elicithub.__version__  # never empty

    asyncio.run(go())


def test_an_owned_loop_sees_one_round_keyed_by_elicitation_id(hub: RunningHub) -> None:
    async def go() -> None:
        async with connected(hub, "2026-07-28") as (client, _):
            arguments = {"message": PROVISION}
            first = await retry(client, arguments, None)
            assert isinstance(first, mt.InputRequiredResult)
            [(key, request)] = (first.input_requests or {}).items()
            assert key.startswith("eli_") and isinstance(request, mt.ElicitRequest)
            # The downstream server's question reaches the client as it was asked: its titled enum included.
            assert isinstance(request.params, mt.ElicitRequestFormParams)
            assert request.params.requested_schema == REGION
            assert first.request_state
            bad = {key: mt.ElicitResult(action="accept", content={"region": "mars"})}
            with pytest.raises(MCPError, match="region"):  # the field is named; nothing changes
                await retry(client, arguments, first.request_state, bad)
            good = {key: mt.ElicitResult(action="accept", content={"region": "us-east-1"})}
            done = await retry(client, arguments, first.request_state, good)
            assert isinstance(done, mt.CallToolResult) and text(done) == "Provisioned orders in us-east-1."
            with pytest.raises(MCPError, match="already used"):  # a replay changes nothing
                await retry(client, arguments, first.request_state, good)

    asyncio.run(go())


def test_a_client_without_elicitation_gets_the_tools_error_at_once(hub: RunningHub) -> None:
    async def go() -> None:
        async with connected(hub, "legacy", elicitation_callback=None) as (client, _):
            result = await client.call_tool("assistant", {"message": PROVISION})
        # Told in MCP's words (not a chat header), as an error result.
        assert "this MCP client did not declare the elicitation capability (form mode)" in text(result)
        assert "x-supports-elicitation" not in text(result)
        assert result.is_error
        with hub.client() as chat:
            assert chat.get("/healthz").json()["pendingElicitations"] == 0

    asyncio.run(go())


def test_without_a_users_token_the_mcp_endpoint_is_401_with_a_challenge(hub: RunningHub) -> None:
    for headers in ({}, {"authorization": "Bearer nope-nope-nope"}):
        response = httpx.post(f"{hub.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


async def retry(
    client: Client, arguments: dict[str, Any], state: str | None, responses: dict[str, Any] | None = None
) -> mt.CallToolResult | mt.InputRequiredResult:
    return await client.session.call_tool(
        "assistant", arguments, input_responses=responses, request_state=state, allow_input_required=True
    )


def test_a_retry_with_some_answers_keeps_the_rest_open_in_a_new_round(hub: RunningHub) -> None:
    async def go() -> None:
        async with connected(hub, "2026-07-28") as (client, _):
            arguments = {"message": '/call mrtr.deploy {"name": "web"}'}
            first = await retry(client, arguments, None)
            assert isinstance(first, mt.InputRequiredResult)
            by_message = {r.params.message: k for k, r in (first.input_requests or {}).items()}  # type: ignore[union-attr]
            assert set(by_message) == {"Which region?", "Deploy web?"}
            confirm = {by_message["Deploy web?"]: mt.ElicitResult(action="accept", content={"confirm": True})}
            second = await retry(client, arguments, first.request_state, confirm)
            assert isinstance(second, mt.InputRequiredResult)
            assert list(second.input_requests or {}) == [by_message["Which region?"]]
            assert second.request_state != first.request_state
            region = {by_message["Which region?"]: mt.ElicitResult(action="accept", content={"region": "eu-west-1"})}
            done = await retry(client, arguments, second.request_state, region)
            assert isinstance(done, mt.CallToolResult) and text(done) == "Deployed web to eu-west-1."

    asyncio.run(go())


def test_another_users_tampered_or_expired_state_is_refused_and_changes_nothing(make_hub: Any) -> None:
    hub = make_hub()

    async def go() -> None:
        arguments = {"message": '/call mrtr.provision {"name": "never"}'}
        async with connected(hub, "2026-07-28") as (alice, _):
            first = await retry(alice, arguments, None)
            assert isinstance(first, mt.InputRequiredResult) and first.request_state
            [key] = list(first.input_requests or {})
            answer = {key: mt.ElicitResult(action="accept", content={"region": "eu-west-1"})}
            async with connected(hub, "2026-07-28", user="bob") as (bob, _):
                with pytest.raises(MCPError):
                    await retry(bob, arguments, first.request_state, answer)
            state = first.request_state
            tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            with pytest.raises(MCPError):
                await retry(alice, arguments, tampered, answer)
            with pytest.raises(MCPError):  # the state is bound to the call's arguments
                await retry(alice, {"message": LEGACY}, first.request_state, answer)
            with hub.client() as chat:  # none of that answered anything
                assert chat.get("/healthz").json()["pendingElicitations"] == 1
            later = time.time() + hub.config.elicitation.timeout_s + 1  # past the question's deadline
            hub.hub.mcp.surface.tickets.clock = lambda: later
            with pytest.raises(MCPError, match="expired"):
                await retry(alice, arguments, first.request_state, answer)

    asyncio.run(go())
    url = hub.config.mcp_servers[1].url
    assert url is not None
    assert httpx.get(url.removesuffix("/mcp") + "/debug/provisioned").json().get("never", 0) == 0


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e999", "-1e999"])
def test_a_number_json_cannot_carry_is_a_parse_error_and_changes_nothing(hub: RunningHub, literal: str) -> None:
    def raw_call(params: str) -> httpx.Response:
        body = f'{{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {params}}}'
        headers = {
            "authorization": f"Bearer {token('alice')}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
        }
        return httpx.post(f"{hub.url}/mcp", content=body, headers=headers, timeout=30)

    async def go() -> None:
        async with connected(hub, "2026-07-28") as (client, _):
            arguments = {"message": PROVISION}
            first = await retry(client, arguments, None)
            assert isinstance(first, mt.InputRequiredResult) and first.request_state
            [key] = list(first.input_requests or {})
            responses = {key: {"action": "accept", "content": {"region": "@number@"}}}
            params = {"name": "assistant", "arguments": arguments, "inputResponses": responses}
            refused = raw_call(
                json.dumps({**params, "requestState": first.request_state}).replace('"@number@"', literal)
            )
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == -32700
            assert refused.json()["error"]["message"].startswith(f"Parse error: {literal} ")
            # The state was not used up and the question still waits: the right answer goes through.
            good = {key: mt.ElicitResult(action="accept", content={"region": "us-east-1"})}
            done = await retry(client, arguments, first.request_state, good)
            assert isinstance(done, mt.CallToolResult) and text(done) == "Provisioned orders in us-east-1."

    asyncio.run(go())
    arguments = '{"name": "assistant", "arguments": {"message": "hi", "conversationId": "mcp-non-finite", "x": %s}}'
    assert raw_call(arguments % literal).json()["error"]["code"] == -32700
    with hub.client() as chat:  # nothing ran
        assert chat.get("/run/api/conversations/mcp-non-finite").status_code == 404
