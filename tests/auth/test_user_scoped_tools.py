"""A user-scoped server configured without `tools:`: its tools are listed without a token where it allows that,
else with the first signed-in user's token (asked before the model runs), and that listing serves everyone after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.auth.conftest import Browser, TrackerProcess
from tests.auth.test_credential_flow import CALL, converse, requests_of
from tests.conftest import HubFactory, McpProcess


def bare(tracker: TrackerProcess) -> dict[str, Any]:
    return {"id": "tracker", "url": tracker.url, "credential_scope": "user"}  # no tools: as DESIGN.md shows it


def test_the_first_user_connects_before_the_model_runs_and_later_users_see_the_tools(
    make_hub: HubFactory, tracker: TrackerProcess, browser: Browser, tmp_path: Path
) -> None:
    hub = make_hub(mcp_servers=[bare(tracker)])
    text, events = converse(hub, CALL, lambda e, _: browser.sign_in(str(e["url"])))
    [asked] = requests_of(events)
    assert asked["mode"] == "url" and asked["context"]["toolName"] == "tools/list"  # before any tool was called
    assert "issue" in text.lower() and not text.startswith("Tool error")

    # Bob has no token, but the tools are known now: he is asked when he calls one, on this hub and on another
    # hub sharing the store (which has never listed them itself).
    bob = Browser("bob")
    try:
        other = make_hub(store={"url": f"sqlite:///{tmp_path / 'hub.db'}"}, mcp_servers=[bare(tracker)])
        for each in (hub, other):

            def decline(event: dict[str, Any], conversation: str, at: Any = each) -> None:
                assert at.answer("bob", conversation, event["elicitationId"], "decline").status_code == 200

            text, events = converse(each, CALL, decline, user="bob")
            [asked] = requests_of(events)
            assert asked["context"]["toolName"] == "list_issues"
            assert text == "Tool error: Authentication required but not provided."
    finally:
        bob.close()


def test_a_server_that_lists_its_tools_openly_needs_no_sign_in_to_show_them(
    make_hub: HubFactory, mrtr_server: McpProcess
) -> None:
    hub = make_hub(mcp_servers=[{"id": "open", "url": mrtr_server.url, "credential_scope": "user"}])
    text, events = converse(hub, "hello")
    assert events == []
    assert "open.provision" in text
