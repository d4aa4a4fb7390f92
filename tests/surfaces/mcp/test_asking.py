"""A downstream server's url-mode question relayed to an MCP client on the hub's /mcp, in both eras: the client's
`accept` goes straight on to the server (it is consent to open the link, not the end of what happens there), and a
client that goes away mid-call ends it quietly, its question cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as mt
import pytest
from mcp.client import ClientRequestContext
from mcp.server.mcpserver import Context, MCPServer

from elicithub.config import parse_config
from elicithub.core.elicitation import State
from elicithub.server.app import create_app
from elicithub.server.hub import Hub
from elicithub.store import open_backend
from tests.conftest import USERS, HubAddress, HubFactory, RunningHub, ServedInThread, free_port, served
from tests.surfaces.mcp.test_server import connected, retry, text, token
from tests.surfaces.mcp.test_tasks import get, start, tasks_client, until_ended, update

LINK = "https://accounts.example.com/connect?session=s1"
"""Where the downstream server sends the person; never opened here (the client only consents)."""

HANG_BOUND_S = 60
"""Ends a call that would wait for the question's deadline (600 s); a relayed accept takes well under a second."""


def linker() -> MCPServer:
    """An SDK server whose one tool asks the person to open LINK and says what the client answered: with
    `elicitation/create` to a 2025-11-25 client, as an InputRequiredResult round to a 2026-07-28 one."""
    server = MCPServer("linker")

    async def connect(ctx: Context) -> mt.CallToolResult | mt.InputRequiredResult:
        if (ctx.protocol_version or "") < "2026-07-28":
            answered = await ctx.elicit_url("Connect your account.", LINK, "link-1")
            return said(answered.action)
        response = (ctx.input_responses or {}).get("link")
        if isinstance(response, mt.ElicitResult):
            return said(response.action)
        request = mt.ElicitRequest(
            params=mt.ElicitRequestURLParams(message="Connect your account.", url=LINK, elicitation_id="link-1")
        )
        return mt.InputRequiredResult(input_requests={"link": request}, request_state="link")

    server.add_tool(connect, name="connect", description="Connect an account at a link.", structured_output=False)
    return server


def said(action: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=f"The user chose {action} at the link.")])


@pytest.fixture
def downstream() -> Iterator[ServedInThread]:
    with served(linker().streamable_http_app(host="127.0.0.1")) as server:
        yield server


@pytest.fixture
def relay_hub(downstream: ServedInThread, make_hub: HubFactory) -> RunningHub:
    # The server comes first, so it stops after the hub (which ends its session there).
    url = f"{downstream.url}/mcp"
    old = {"id": "old", "url": url, "protocol": "legacy"}
    return make_hub(mcp_servers=[old, {"id": "new", "url": url, "protocol": "2026-07-28"}])


@pytest.fixture
def served_problems(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[tuple[str, str]]]]:
    """The warnings, errors and tracebacks the servers in this process log from their threads so far, uvicorn's
    included (they do not reach the root logger); the test's own client logs from the test's thread."""
    caplog.set_level(logging.WARNING)
    uvicorn = logging.getLogger("uvicorn")
    uvicorn.addHandler(caplog.handler)
    here = threading.get_ident()

    def problems() -> list[tuple[str, str]]:
        return [
            (r.name, r.getMessage())
            for r in caplog.records
            if r.thread != here and (r.levelno >= logging.WARNING or r.exc_info is not None)
        ]

    yield problems
    uvicorn.removeHandler(caplog.handler)


def test_a_2025_client_accepting_a_relayed_link_passes_the_accept_on_at_once(relay_hub: RunningHub) -> None:
    async def go() -> None:
        async with connected(relay_hub, "legacy", answer=mt.ElicitResult(action="accept")) as (client, asked):
            with anyio.fail_after(HANG_BOUND_S):
                result = await client.call_tool("assistant", {"message": "/call old.connect {}"})
        [params] = asked
        assert isinstance(params, mt.ElicitRequestURLParams) and params.url == LINK
        assert text(result) == "The user chose accept at the link." and not result.is_error

    asyncio.run(go())
    assert relay_hub.hub.broker.pending_here() == 0


def test_a_2026_client_retrying_with_accept_on_a_relayed_link_gets_the_result(relay_hub: RunningHub) -> None:
    async def go() -> None:
        async with connected(relay_hub, "2026-07-28") as (client, _):
            arguments = {"message": "/call new.connect {}"}
            first = await retry(client, arguments, None)
            assert isinstance(first, mt.InputRequiredResult)
            [(key, request)] = (first.input_requests or {}).items()
            assert isinstance(request, mt.ElicitRequest) and isinstance(request.params, mt.ElicitRequestURLParams)
            assert request.params.url == LINK
            with anyio.fail_after(HANG_BOUND_S):
                done = await retry(client, arguments, first.request_state, {key: mt.ElicitResult(action="accept")})
        assert isinstance(done, mt.CallToolResult)
        assert text(done) == "The user chose accept at the link." and not done.is_error

    asyncio.run(go())
    assert relay_hub.hub.broker.pending_here() == 0


def test_a_2026_task_updated_with_accept_on_a_relayed_link_completes(relay_hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(relay_hub) as (client, _):
            handle = await start(client, "/call new.connect {}")
            [(key, request)] = (await get(client, handle.task_id))["inputRequests"].items()
            assert request["params"]["url"] == LINK
            await update(client, handle.task_id, {key: {"action": "accept"}})
            done = await until_ended(client, handle.task_id)
        assert done["status"] == "completed"
        assert done["result"]["content"][0]["text"] == "The user chose accept at the link."

    asyncio.run(go())


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_relayed_link_declined_or_cancelled_reaches_the_server_as_such(relay_hub: RunningHub, action: str) -> None:
    async def go() -> None:
        answer = mt.ElicitResult(action=action)  # type: ignore[arg-type]
        async with connected(relay_hub, "legacy", answer=answer) as (client, _):
            with anyio.fail_after(HANG_BOUND_S):
                result = await client.call_tool("assistant", {"message": "/call old.connect {}"})
        assert text(result) == f"The user chose {action} at the link."

    asyncio.run(go())


def test_a_client_that_closes_its_session_mid_call_ends_it_quietly_and_cancels_the_question(
    relay_hub: RunningHub, served_problems: Callable[[], list[tuple[str, str]]]
) -> None:
    asked: list[str] = []

    async def go() -> None:
        shown = anyio.Event()

        async def never_answers(context: ClientRequestContext, params: mt.ElicitRequestParams) -> Any:
            assert isinstance(params, mt.ElicitRequestURLParams) and params.elicitation_id is not None
            asked.append(params.elicitation_id)
            shown.set()
            await anyio.sleep_forever()

        async with connected(relay_hub, "legacy", elicitation_callback=never_answers) as (client, _):
            async with anyio.create_task_group() as calls:
                calls.start_soon(client.call_tool, "assistant", {"message": "/call old.connect {}"})
                await shown.wait()
                calls.cancel_scope.cancel()  # the client gives up on the call, then closes its session

    asyncio.run(go())
    [elicitation_id] = asked  # the hub's id of the question, as the client was shown it
    ended = relay_hub.on_loop(relay_hub.hub.broker.wait(elicitation_id))
    assert ended.outcome == "cancelled"
    assert served_problems() == []


def test_a_session_ended_while_its_notification_is_handed_over_logs_nothing(
    relay_hub: RunningHub, served_problems: Callable[[], list[tuple[str, str]]]
) -> None:
    # What a client that gives up on a call sends: `notifications/cancelled` and its DELETE at once.
    headers = {
        "authorization": f"Bearer {token('alice')}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}

    async def session(client: httpx.AsyncClient) -> list[int]:
        opened = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        own = {"mcp-session-id": opened.headers["mcp-session-id"]}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await client.post("/mcp", json=initialized, headers=own)).status_code == 202
        cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        told, ended = await asyncio.gather(
            client.post("/mcp", json=cancelled, headers=own), client.delete("/mcp", headers=own)
        )
        return [told.status_code, ended.status_code]

    async def go() -> list[list[int]]:
        async with httpx.AsyncClient(base_url=relay_hub.url, headers=headers, timeout=30) as client:
            return [await session(client) for _ in range(20)]

    answered = asyncio.run(go())
    # The notification was taken before the session ended (202), or found it ended (404); the end always went through.
    assert all(told in (202, 404) and ended == 200 for told, ended in answered), answered
    assert served_problems() == []


def test_a_hub_that_stops_mid_call_keeps_the_question_for_the_resumed_run(
    downstream: ServedInThread, tmp_path: Path
) -> None:
    # Stopped as `elicithub serve` stops (a short grace for open requests), while a 2025-11-25 call waits on its
    # client's answer: the run resumes after a restart, and its question may still be answered elsewhere.
    store = f"sqlite:///{tmp_path / 'hub.db'}"
    port = free_port()
    config = parse_config(
        {
            "public_url": f"http://127.0.0.1:{port}",
            "store": {"url": store},
            "secrets": {"key_file": str(tmp_path / "secret.key")},
            "users": USERS,
            "mcp_servers": [{"id": "old", "url": f"{downstream.url}/mcp", "protocol": "legacy"}],
        }
    )
    hub = ServedInThread(create_app(config, Hub(config)), port, timeout_graceful_shutdown=1)
    asked: list[str] = []

    async def go() -> None:
        shown = anyio.Event()

        async def never_answers(context: ClientRequestContext, params: mt.ElicitRequestParams) -> Any:
            assert isinstance(params, mt.ElicitRequestURLParams) and params.elicitation_id is not None
            asked.append(params.elicitation_id)
            shown.set()
            await anyio.sleep_forever()

        with contextlib.suppress(Exception):  # the client's session breaks with the hub gone
            async with connected(HubAddress(port), "legacy", elicitation_callback=never_answers) as (client, _):
                async with anyio.create_task_group() as calls:
                    calls.start_soon(client.call_tool, "assistant", {"message": "/call old.connect {}"})
                    await shown.wait()
                    await anyio.to_thread.run_sync(hub.stop)
                    calls.cancel_scope.cancel()

    try:
        asyncio.run(go())
    finally:
        hub.stop()
    assert not hub.thread.is_alive()
    [elicitation_id] = asked

    async def stored() -> State | None:
        backend = open_backend(store)
        try:
            found = await backend.elicitations.get(elicitation_id)
        finally:
            await backend.close()
        return None if found is None else found.state

    assert asyncio.run(stored()) is State.PENDING
