"""The gateway's credential gate: a direct call of a user-scoped server's tool asks this MCP client to sign in (url
mode), the person signs in at the real authorization server on loopback, and the call goes on to the server's own
result; a token the server refuses (401) asks again, once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import mcp_types as mt
import pytest
from mcp.client import ClientRequestContext
from mcp.shared.exceptions import MCPError

from tests.auth.conftest import Browser, TrackerProcess, tracker_entry
from tests.auth.conftest import tracker as tracker  # the fixture, shared with the sign-in tests
from tests.auth.test_user_scoped_tools import bare
from tests.conftest import HubFactory, RunningHub
from tests.surfaces.mcp.test_server import connected, text

NOT_PROVIDED = "Authentication required but not provided."


@pytest.fixture
def signing_hub(make_hub: HubFactory, tracker: TrackerProcess) -> RunningHub:
    return make_hub(mcp_servers=[tracker_entry(tracker)])


class Person:
    """Alice at her MCP client: each url question is a sign-in she completes in a browser of her own (a new one each
    time, as after a restart), then her client answers `accept`; `refuse` makes her client decline instead."""

    def __init__(self, refuse: bool = False, user: str = "alice") -> None:
        self.refuse = refuse
        self.user = user
        self.links: list[str] = []
        self.completed: list[str] = []  # notifications/elicitation/complete (2025-11-25)
        self.browsers: list[Browser] = []

    async def on_elicit(self, context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        assert isinstance(params, mt.ElicitRequestURLParams), params
        self.links.append(params.url)
        if self.refuse:
            return mt.ElicitResult(action="decline")
        browser = Browser(self.user)
        self.browsers.append(browser)
        page = await asyncio.to_thread(browser.sign_in, params.url)
        assert "Connected" in page.text, page.text
        return mt.ElicitResult(action="accept")

    async def on_message(self, message: object) -> None:
        if isinstance(message, mt.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)

    async def call(self, hub: RunningHub, mode: str, tool: str, arguments: dict[str, Any]) -> mt.CallToolResult:
        kw: dict[str, Any] = {"elicitation_callback": self.on_elicit, "message_handler": self.on_message}
        async with connected(hub, mode, self.user, **kw) as (client, _):
            return await client.call_tool(tool, arguments)

    def close(self) -> None:
        for browser in self.browsers:
            browser.close()


@pytest.fixture
def alice() -> Iterator[Person]:
    person = Person()
    yield person
    person.close()


def created(result: mt.CallToolResult, title: str) -> bool:
    """The tracker's own result for creating `title` (its number depends on what alice created before)."""
    said = text(result)
    return said.startswith("Created issue #") and said.endswith(f": {title}") and not result.is_error


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_call_that_needs_the_callers_account_asks_them_to_sign_in_and_goes_on(
    signing_hub: RunningHub, tracker: TrackerProcess, alice: Person, mode: str
) -> None:
    before = tracker.stats()
    title = f"Printer on fire ({mode})"
    result = asyncio.run(alice.call(signing_hub, mode, "tracker.create_issue", {"title": title}))
    assert created(result, title), result
    assert result.structured_content is None  # the server's result as it gave it: text only
    [link] = alice.links
    assert link.startswith(f"{signing_hub.url}/auth/connect?")
    if mode == "legacy":  # the client is told the sign-in it accepted is done
        assert len(alice.completed) == 1 and alice.completed[0].startswith("eli_")
    after = tracker.stats()
    assert after["unauthenticated"] == before["unauthenticated"]  # never called without alice's token
    assert after["toolCalls"].get("create_issue", 0) == before["toolCalls"].get("create_issue", 0) + 1
    # The next call finds her token: nothing is asked.
    again = asyncio.run(alice.call(signing_hub, mode, "tracker.list_issues", {}))
    assert text(again).startswith("You have ") and title in text(again) and len(alice.links) == 1


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_token_the_server_refuses_asks_the_caller_to_sign_in_again_once(
    signing_hub: RunningHub, tracker: TrackerProcess, alice: Person, mode: str
) -> None:
    assert created(asyncio.run(alice.call(signing_hub, mode, "tracker.create_issue", {"title": "first"})), "first")
    tracker.revoke_all()  # the tracker answers alice's token with 401 from now on
    second = asyncio.run(alice.call(signing_hub, mode, "tracker.create_issue", {"title": "second"}))
    assert created(second, "second"), second
    first_link, second_link = alice.links  # asked once more, with a new link
    assert first_link != second_link
    # Refused again, and this time the person declines: the call ends with the hub's reason, it does not loop.
    tracker.revoke_all()
    refusing = Person(refuse=True)
    third = asyncio.run(refusing.call(signing_hub, mode, "tracker.create_issue", {"title": "third"}))
    assert len(refusing.links) == 1
    assert third.is_error and text(third) == NOT_PROVIDED
    with signing_hub.client() as chat:
        assert chat.get("/healthz").json()["pendingElicitations"] == 0


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_connect_of_a_server_nobody_listed_signs_in_and_says_its_tools_though_the_listing_changed_meanwhile(
    make_hub: HubFactory, tracker: TrackerProcess, alice: Person, mode: str
) -> None:
    # The sign-in lists the server's tools in place of `tracker.connect`; the call that asked goes on regardless
    # (for 2026-07-28, its retry, whose state is sealed for it).
    hub = make_hub(mcp_servers=[bare(tracker)])
    result = asyncio.run(alice.call(hub, mode, "tracker.connect", {}))
    assert not result.is_error, text(result)
    said = text(result)
    assert said.startswith("Your Tracker account is connected. Its tools: ")
    assert "tracker.list_issues" in said and "tracker.create_issue" in said
    assert len(alice.links) == 1


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_connect_stays_callable_for_whoever_has_not_signed_in_after_another_persons_sign_in_listed_the_tools(
    make_hub: HubFactory, tracker: TrackerProcess, alice: Person, mode: str
) -> None:
    # Bob's client listed `tracker.connect` before alice's sign-in listed the tracker's tools for everyone: the
    # name it holds is still his way to sign in, not an unknown tool.
    hub = make_hub(mcp_servers=[bare(tracker)])

    async def bobs_listing() -> set[str]:
        async with connected(hub, mode, "bob") as (client, _):
            return {t.name for t in (await client.list_tools()).tools}

    assert "tracker.connect" in asyncio.run(bobs_listing())
    assert not asyncio.run(alice.call(hub, mode, "tracker.connect", {})).is_error
    assert "tracker.connect" not in asyncio.run(bobs_listing())
    bob = Person(user="bob")
    try:
        result = asyncio.run(bob.call(hub, mode, "tracker.connect", {}))
    finally:
        bob.close()
    assert not result.is_error, text(result)
    assert text(result).startswith("Your Tracker account is connected. Its tools: ")
    assert len(bob.links) == 1 and len(alice.links) == 1

    # Without a user-scoped server behind it, `SERVER.connect` is as unknown as any other name.
    async def call_unknown() -> MCPError:
        async with connected(hub, mode, "bob") as (client, _):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("nothing.connect", {})
        return refused.value

    refused = asyncio.run(call_unknown())
    assert (refused.code, refused.message) == (mt.INVALID_PARAMS, "Unknown tool: nothing.connect")
