"""`notifications/tools/list_changed` on `/mcp`: a sign-in that changes what a person may use (a user-scoped server's
tools where `SERVER.connect` stood) reaches that person's open sessions, in either era (the SDK client's handler sees
it), on whichever hub sharing the store the sign-in completes, and nobody else's; the next listing shows the tools."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.server.streamable_http import GET_STREAM_KEY

from tests.auth.conftest import Browser, TrackerProcess
from tests.auth.conftest import tracker as tracker  # the fixture, shared with the sign-in tests
from tests.auth.test_credential_flow import converse
from tests.auth.test_user_scoped_tools import bare
from tests.conftest import HubFactory, McpProcess, RunningHub, eventually
from tests.core_fixtures import DEADLINE_S
from tests.surfaces.mcp.test_server import connected, text

TRACKER_TOOLS = {"tracker.list_issues", "tracker.create_issue"}


@dataclass
class Session:
    """A person's open `/mcp` session: the tool-list changes its SDK client's message handler saw, and a browser of
    theirs for the sign-ins it is asked."""

    user: str
    changes: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)
    browser: Browser = field(init=False)
    client: Client = field(init=False)

    def __post_init__(self) -> None:
        self.browser = Browser(self.user)

    async def on_message(self, message: object) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self.changes += 1
            self.changed.set()

    async def on_elicit(self, context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        assert isinstance(params, mt.ElicitRequestURLParams), params
        page = await asyncio.to_thread(self.browser.sign_in, params.url)
        assert "Connected" in page.text, page.text
        return mt.ElicitResult(action="accept")

    async def told(self) -> None:
        with anyio.fail_after(DEADLINE_S):
            await self.changed.wait()
        self.changed = anyio.Event()

    async def tools(self) -> set[str]:
        return {t.name for t in (await self.client.list_tools()).tools}


@contextlib.asynccontextmanager
async def session(hub: RunningHub, mode: str, user: str) -> AsyncIterator[Session]:
    """`user`'s session, listening for tool changes as its era has it: a 2026-07-28 client opens a listen stream;
    a 2025-11-25 one lists its tools (its standalone stream, which carries the notification, opens by itself)."""
    opened = Session(user)
    kw: dict[str, Any] = {"elicitation_callback": opened.on_elicit, "message_handler": opened.on_message}
    try:
        async with connected(hub, mode, user=user, **kw) as (client, _):
            opened.client = client
            if mode == "legacy":
                await client.list_tools()
                yield opened
                return
            async with client.listen(tools_list_changed=True) as listening:
                assert listening.honored.tools_list_changed
                yield opened
    finally:
        opened.browser.close()


def standalone_streams(hub: RunningHub) -> int:
    """How many of the hub's 2025-11-25 sessions have their standalone (GET) stream open, so that a notification
    sent now reaches the client. Only the SDK's transports know; the test reads it there."""
    surface = hub.hub.mcp.surface  # built by the sessions' first request
    assert surface is not None
    transports = list(surface.server.session_manager._server_instances.values())
    return sum(GET_STREAM_KEY in t._request_streams for t in transports)


async def until_streaming(hub: RunningHub, mode: str, sessions: int) -> None:
    if mode == "legacy":
        await asyncio.to_thread(eventually, lambda: standalone_streams(hub) >= sessions, "no standalone streams")


@pytest.fixture
def unlisted(make_hub: HubFactory, tracker: TrackerProcess, mrtr_server: McpProcess) -> RunningHub:
    """A hub with a user-scoped server whose tools nobody has listed yet (offered as `tracker.connect`)."""
    return make_hub(mcp_servers=[{"id": "mrtr", "url": mrtr_server.url}, bare(tracker)])


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_sign_in_through_the_gateway_tells_the_callers_sessions_and_nobody_elses(
    unlisted: RunningHub, mode: str
) -> None:
    async def go() -> None:
        async with session(unlisted, mode, "alice") as alice, session(unlisted, mode, "bob") as bob:
            await until_streaming(unlisted, mode, 2)
            assert "tracker.connect" in await alice.tools() and not TRACKER_TOOLS & await alice.tools()
            connected_ = await alice.client.call_tool("tracker.connect", {})
            assert text(connected_).startswith("Your Tracker account is connected.")
            await alice.told()
            assert TRACKER_TOOLS <= await alice.tools() and "tracker.connect" not in await alice.tools()
            # Bob signs in too (calling a tool of the server, now listed): he is told of his own sign-in alone.
            # Had he been told of alice's, it would have come first (the casts keep their order).
            issues = await bob.client.call_tool("tracker.list_issues", {})
            assert text(issues).startswith("You have ")
            await bob.told()
            assert (alice.changes, bob.changes) == (1, 1)

    asyncio.run(go())
    # Closed sessions are let go of: nothing is held for them.
    changes = unlisted.hub.tool_changes
    eventually(lambda: not changes._connections and not changes._listeners, "closed sessions are still held")


@pytest.fixture
def two_hubs(make_hub: HubFactory, tracker: TrackerProcess, redis_url: str) -> Iterator[tuple[RunningHub, RunningHub]]:
    store = {"url": redis_url}
    yield make_hub(mcp_servers=[bare(tracker)], store=store), make_hub(mcp_servers=[bare(tracker)], store=store)


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_sign_in_completed_on_another_hub_reaches_the_session_on_this_one(
    two_hubs: tuple[RunningHub, RunningHub], mode: str
) -> None:
    a, b = two_hubs

    async def go() -> None:
        async with session(a, mode, "alice") as alice:
            await until_streaming(a, mode, 1)
            assert "tracker.connect" in await alice.tools()
            # She connects her account in a chat on the other hub; its callback is served there too.
            chat = await asyncio.to_thread(
                converse, b, "/call tracker.connect {}", lambda e, _: alice.browser.sign_in(e["url"])
            )
            assert chat[0].startswith("Your Tracker account is connected."), chat
            await alice.told()
            assert TRACKER_TOOLS <= await alice.tools()

    asyncio.run(go())


@pytest.mark.parametrize(("tools", "declared"), [(True, True), (False, False)])
def test_the_server_declares_tool_list_changes_only_when_it_lists_downstream_tools(
    make_hub: HubFactory, tools: bool, declared: bool
) -> None:
    hub = make_hub(mcp_server={"tools": tools})

    async def go() -> None:
        async with connected(hub, "legacy") as (client, _):
            capabilities = client.server_capabilities
        assert capabilities.tools is not None and bool(capabilities.tools.list_changed) is declared

    asyncio.run(go())
