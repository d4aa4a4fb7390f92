"""An MCP client calls the hub's agent, whose tool needs the user's own account: the sign-in reaches the client as a
url-mode question in either era, completes through the real OAuth flow, and the same call returns the result."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import mcp_types as mt
import pytest
from mcp.client import ClientRequestContext

from tests.auth.conftest import Browser, TrackerProcess, bearer
from tests.conftest import RunningHub, eventually
from tests.surfaces.mcp.test_server import connected, text


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_sign_in_asked_of_an_mcp_client_completes_the_call(
    auth_hub: RunningHub, tracker: TrackerProcess, browser: Browser, mode: str
) -> None:
    completed: list[str] = []

    async def sign_in(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        assert isinstance(params, mt.ElicitRequestURLParams)
        assert params.url.startswith(f"{auth_hub.url}/auth/connect?")
        page = await asyncio.to_thread(browser.sign_in, params.url)
        assert "Connected" in page.text
        return mt.ElicitResult(action="accept")

    async def on_message(message: object) -> None:
        if isinstance(message, mt.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)

    async def go() -> None:
        async with connected(auth_hub, mode, elicitation_callback=sign_in, message_handler=on_message) as (client, _):
            result = await client.call_tool("assistant", {"message": "/call tracker.list_issues {}"})
        assert "issue" in text(result).lower() and not result.is_error
        if mode == "legacy":
            assert len(completed) == 1 and completed[0].startswith("eli_")  # notifications/elicitation/complete

    before = tracker.stats()
    asyncio.run(go())
    assert tracker.stats()["unauthenticated"] == before["unauthenticated"]


def relayed(hub: RunningHub, url: str) -> None:
    """Until the hub's MCP surface waits for the sign-in beside the run (which waits in a task, or parked without
    one): the client's `accept` has arrived. (The link names the question; a 2026-07-28 client is not told its id.)"""
    token = parse_qs(urlsplit(url).query)["t"][0]
    elicitation_id = hub.hub.links.verify(token, 60).elicitation_id

    def both_wait() -> bool:
        return hub.hub.broker.waiters(elicitation_id) + hub.hub.conversations.parked() >= 2

    eventually(both_wait, "the client's accept never reached the hub")


@pytest.mark.parametrize("order", ["accept-then-sign-in", "accept-during-sign-in"])
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_client_that_accepts_before_the_person_signs_in_gets_the_result(
    auth_hub: RunningHub, tracker: TrackerProcess, browser: Browser, mode: str, order: str
) -> None:
    # The spec's order for url mode: the client says `accept` when the person agrees to open the link, the
    # person signs in afterwards, and the call goes on when the sign-in completes.
    completed: list[str] = []
    signed_in: list[httpx.Response] = []

    def person(url: str, consent: httpx.Response | None) -> None:
        relayed(auth_hub, url)
        page = browser.press(consent, "Allow") if consent is not None else browser.sign_in(url)
        signed_in.append(page)

    async def accept_first(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        assert isinstance(params, mt.ElicitRequestURLParams)
        # During: the consent page is open, not yet allowed, when the client answers.
        consent = await asyncio.to_thread(browser.open, params.url) if order == "accept-during-sign-in" else None
        threading.Thread(target=person, args=(params.url, consent), daemon=True).start()
        return mt.ElicitResult(action="accept")

    async def on_message(message: object) -> None:
        if isinstance(message, mt.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)

    async def go() -> None:
        async with connected(auth_hub, mode, elicitation_callback=accept_first, message_handler=on_message) as (
            client,
            _,
        ):
            with anyio.fail_after(60):
                result = await client.call_tool("assistant", {"message": "/call tracker.list_issues {}"})
        assert "issue" in text(result).lower() and not result.is_error, text(result)
        if mode == "legacy":
            assert len(completed) == 1

    asyncio.run(go())
    assert len(signed_in) == 1 and "Connected" in signed_in[0].text
    assert auth_hub.hub.broker.pending_here() == 0


def rpc(client: httpx.Client, session: str | None, method: str, params: dict[str, Any], id_: int | None) -> Any:
    """One JSON-RPC message over streamable HTTP, as a form-only 2025-11-25 client would send it."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    if session is not None:
        headers["mcp-session-id"] = session
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        message["id"] = id_
    response = client.post("/mcp", json=message, headers=headers)
    assert response.status_code in (200, 202), response.text
    if id_ is None:
        return None
    for line in response.text.splitlines():  # the reply comes as an SSE event
        if line.startswith("data: "):
            data = json.loads(line.removeprefix("data: "))
            if data.get("id") == id_:
                return response.headers.get("mcp-session-id"), data
    raise AssertionError(f"no reply to {method}: {response.text}")


def test_a_client_that_cannot_open_links_is_not_sent_one_and_nothing_stays_open(auth_hub: RunningHub) -> None:
    with httpx.Client(base_url=auth_hub.url, headers=bearer("alice"), timeout=30) as client:
        capabilities = {"elicitation": {"form": {}}}  # form only: no url mode
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "t", "version": "1"},
        }
        session, reply = rpc(client, None, "initialize", init, 1)
        assert reply["result"]["protocolVersion"] == "2025-11-25"
        rpc(client, session, "notifications/initialized", {}, None)
        call = {"name": "assistant", "arguments": {"message": "/call tracker.list_issues {}"}}
        _, reply = rpc(client, session, "tools/call", call, 2)
    result = reply["result"]
    said = result["content"][0]["text"]
    assert "Tool tracker.list_issues requires user authentication." in said
    assert "This MCP client did not declare the elicitation capability (url mode)" in said  # the mode it lacks
    with auth_hub.client() as chat:
        assert chat.get("/healthz").json()["pendingElicitations"] == 0


def test_an_mcp_client_without_elicitation_is_told_the_sign_in_needs_url_mode(auth_hub: RunningHub) -> None:
    async def go() -> None:
        async with connected(auth_hub, "legacy", elicitation_callback=None) as (client, _):
            result = await client.call_tool("assistant", {"message": "/call tracker.list_issues {}"})
        assert result.is_error
        assert "Tool tracker.list_issues requires user authentication." in text(result)
        assert "This MCP client did not declare the elicitation capability (url mode)" in text(result)

    asyncio.run(go())
