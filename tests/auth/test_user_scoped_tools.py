"""A user-scoped server configured without `tools:`: its tools are listed without a token where it allows that;
else it is offered as `SERVER.connect` until someone signs in, and the sign-in is asked only of a run that targets
it. The listing made with that token then serves everyone, on every hub sharing the store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.auth.conftest import Browser, TrackerProcess
from tests.auth.test_credential_flow import CALL, chat, converse, requests_of
from tests.conftest import HubFactory, McpProcess, RunningHub
from tests.models.script import Text, ToolCall
from tests.models.standins import ModelStandIn
from tests.runtime.test_models import v1_model
from tests.surfaces.mcp.test_server import connected

PROVISION = '/call deploy.provision {"name": "orders"}'


def bare(tracker: TrackerProcess) -> dict[str, Any]:
    return {"id": "tracker", "url": tracker.url, "credential_scope": "user"}  # no tools: as the README shows it


@pytest.fixture
def unlisted(make_hub: HubFactory, tracker: TrackerProcess, mrtr_server: McpProcess) -> RunningHub:
    return make_hub(mcp_servers=[{"id": "deploy", "url": mrtr_server.url}, bare(tracker)])


def test_an_unrelated_chat_is_never_asked_to_connect_an_unlisted_server(
    unlisted: RunningHub, tracker: TrackerProcess
) -> None:
    before = tracker.stats()["toolCalls"]
    text, events = converse(unlisted, "hello")
    assert events == []
    assert "- tracker.connect: Connect your Tracker account" in text and "deploy.provision" in text

    def region(event: dict[str, Any], conversation: str) -> None:
        answered = unlisted.answer("alice", conversation, event["elicitationId"], "accept", {"region": "eu-west-1"})
        assert answered.status_code == 200

    text, events = converse(unlisted, PROVISION, region)
    [asked] = requests_of(events)
    assert asked["mode"] == "form" and asked["context"]["serverId"] == "deploy"
    assert text == "Provisioned orders in eu-west-1."
    assert tracker.stats()["toolCalls"] == before  # an unauthenticated listing was tried, no tool was called


def test_a_call_to_an_unlisted_servers_tool_signs_in_lists_the_tools_and_goes_on(
    unlisted: RunningHub, make_hub: HubFactory, tracker: TrackerProcess, browser: Browser, tmp_path: Path
) -> None:
    text, events = converse(unlisted, CALL, lambda e, _: browser.sign_in(str(e["url"])))
    [asked] = requests_of(events)
    assert asked["mode"] == "url"
    assert asked["context"] == {"trigger": "credential_required", "serverId": "tracker", "toolName": "list_issues"}
    assert "issue" in text.lower() and not text.startswith("Tool error")

    # The listing is kept for everyone: Bob, who has no token, sees the tools on this hub and on another hub
    # sharing the store (which never listed them itself), and is asked when he calls one.
    other = make_hub(store={"url": f"sqlite:///{tmp_path / 'hub.db'}"}, mcp_servers=[bare(tracker)])
    for each in (unlisted, other):
        text, events = converse(each, "hello", user="bob")
        assert events == [] and "tracker.list_issues" in text and "tracker.connect" not in text

        def decline(event: dict[str, Any], conversation: str, at: Any = each) -> None:
            assert at.answer("bob", conversation, event["elicitationId"], "decline").status_code == 200

        text, events = converse(each, CALL, decline, user="bob")
        [asked] = requests_of(events)
        assert asked["context"]["toolName"] == "list_issues"
        assert text == "Tool error: Authentication required but not provided."


def test_connect_signs_in_and_names_the_tools(unlisted: RunningHub, browser: Browser) -> None:
    text, events = converse(unlisted, "/call tracker.connect {}", lambda e, _: browser.sign_in(str(e["url"])))
    [asked] = requests_of(events)
    assert asked["context"]["toolName"] == "connect"
    assert text == "Your Tracker account is connected. Its tools: tracker.list_issues, tracker.create_issue."
    # From now on the real tools are offered, to the model and in the help text.
    text, events = converse(unlisted, "hello")
    assert events == [] and "tracker.list_issues" in text and "tracker.connect" not in text


def test_a_tool_the_server_turns_out_not_to_have_is_named_as_missing(unlisted: RunningHub, browser: Browser) -> None:
    text, _ = converse(unlisted, "/call tracker.nothing {}", lambda e, _: browser.sign_in(str(e["url"])))
    assert text == (
        "Tool error: There is no tool tracker.nothing. Its tools: tracker.list_issues, tracker.create_issue."
    )


@pytest.mark.parametrize("refusal", ["decline", "deny", "cancel"])
def test_a_refused_sign_in_says_what_a_listed_tool_says(unlisted: RunningHub, browser: Browser, refusal: str) -> None:
    def refuse(event: dict[str, Any], conversation: str) -> None:
        if refusal == "deny":
            browser.sign_in(str(event["url"]), "Deny")
        else:
            assert unlisted.answer("alice", conversation, event["elicitationId"], refusal).status_code == 200

    text, events = converse(unlisted, CALL, refuse)
    assert len(requests_of(events)) == 1
    assert text == "Tool error: Authentication required but not provided."


def test_an_expired_sign_in_says_what_a_listed_tool_says(make_hub: HubFactory, tracker: TrackerProcess) -> None:
    hub = make_hub(mcp_servers=[bare(tracker)], elicitation={"timeout_s": 1})
    text, events = converse(hub, CALL)
    assert [e.get("outcome") for e in events if e["type"] == "elicitation-resolved"] == ["expired"]
    assert text == "Tool error: Authentication required but not provided."


def test_a_client_that_cannot_be_asked_is_told_the_tool_needs_a_sign_in(unlisted: RunningHub) -> None:
    stream = chat(unlisted, CALL, elicitation=False)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == (
        "Tool error: Tool tracker.list_issues requires user authentication. The user needs to connect their "
        "Tracker account before this tool can be used."
    )


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelStandIn]:
    monkeypatch.setenv("STANDIN_KEY", "sk-test-key")
    with ModelStandIn() as server:
        yield server


def test_after_connect_the_model_is_asked_again_with_the_real_tools(
    make_hub: HubFactory, tracker: TrackerProcess, browser: Browser, standin: ModelStandIn
) -> None:
    hub = make_hub(model=v1_model(standin), mcp_servers=[bare(tracker)])
    standin.reply(ToolCall("tracker__connect", {}))  # all it is offered
    standin.reply(ToolCall("tracker__list_issues", {}))
    last = standin.reply(Text("Here are your issues."))
    text, events = converse(hub, "what are my issues?", lambda e, _: browser.sign_in(str(e["url"])))
    assert len(requests_of(events)) == 1
    offered = [[t["function"]["name"] for t in r.body.get("tools", [])] for r in standin.requests]
    assert offered[0] == ["tracker__connect"]
    assert "tracker__list_issues" in offered[1] and "tracker__connect" not in offered[1]
    assert "issue" in last.served().body["messages"][-1]["content"].lower()  # the tool's result reached the model
    assert text.endswith("Here are your issues.")


def test_a_server_that_lists_its_tools_openly_needs_no_sign_in_to_show_them(
    make_hub: HubFactory, mrtr_server: McpProcess
) -> None:
    hub = make_hub(mcp_servers=[{"id": "open", "url": mrtr_server.url, "credential_scope": "user"}])
    text, events = converse(hub, "hello")
    assert events == []
    assert "open.provision" in text and "open.connect" not in text


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_the_hubs_mcp_listing_shows_connect_until_a_sign_in_shows_the_tools(
    unlisted: RunningHub, browser: Browser, mode: str
) -> None:
    async def listed() -> list[str]:
        async with connected(unlisted, mode) as (client, _):
            return [t.name for t in (await client.list_tools()).tools]

    before = asyncio.run(listed())
    assert "tracker.connect" in before and "deploy.provision" in before
    converse(unlisted, "/call tracker.connect {}", lambda e, _: browser.sign_in(str(e["url"])))
    after = asyncio.run(listed())
    assert {"tracker.list_issues", "tracker.create_issue"} <= set(after) and "tracker.connect" not in after
