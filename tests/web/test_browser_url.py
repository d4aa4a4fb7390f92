"""url-mode prompts in the browser: the real sign-in through the hub's hosted pages, and stand-ins for the rest.

The real flow runs against the demo tracker (an OAuth-protected MCP server): Connect opens the hub's
/auth/connect in a popup, the person allows access, and /auth/callback tells this window it is done. What the
hub never sends (links that are not http(s), a message from a foreign origin, a blocked popup) is driven
through the widget's own render function or a canned UI message stream served in place of /run/api/chat.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from tests.auth.conftest import TrackerProcess, tracker_entry
from tests.conftest import HubFactory, RunningHub
from tests.web.conftest import (
    OpenPage,
    Requests,
    ask,
    connect,
    conversation_path,
    in_ten_minutes,
    reload,
    render,
    say,
    screenshot,
)

LIST_ISSUES = "/call tracker.list_issues {}"


@pytest.fixture(scope="module")
def tracker() -> Iterator[TrackerProcess]:
    server = TrackerProcess()
    yield server
    server.kill()


@pytest.fixture
def tracker_hub(make_hub: HubFactory, tracker: TrackerProcess) -> RunningHub:
    """A hub with the demo tracker, an MCP server whose tools need the person's sign-in."""
    return make_hub(mcp_servers=[tracker_entry(tracker)])


def url_event(url: str, elicitation_id: str = "eli_url") -> dict[str, Any]:
    return {
        "type": "elicitation-request",
        "elicitationId": elicitation_id,
        "mode": "url",
        "message": "Tracker requires authentication.",
        "url": url,
        "context": {"trigger": "credential_required", "serverId": "tracker", "toolName": "list_issues"},
        "expiresAt": in_ten_minutes(),
    }


def sse(*parts: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(p)}\n\n" for p in parts) + ": keep-alive\n\ndata: [DONE]\n\n"


def stand_in_hub(page: Page, event: dict[str, Any], answers: list[dict[str, Any]]) -> None:
    """Serve /run/api/chat from canned streams: a message gets the url prompt, an answer its resolution."""

    def chat(route: Route) -> None:
        part = json.loads(route.request.post_data or "{}")["messages"][-1]["parts"][0]
        if part["type"] == "elicitation-response":
            answers.append(part)
            outcome = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}[part["action"]]
            resolved = {"type": "elicitation-resolved", "elicitationId": part["elicitationId"], "outcome": outcome}
            body = sse(
                {"type": "start"},
                {"type": "data-elicitation-resolved", "id": part["elicitationId"], "data": resolved},
                {"type": "finish"},
            )
        else:
            body = sse(
                {"type": "start", "messageId": "msg_1"},
                {"type": "tool-input-available", "toolCallId": "c1", "toolName": "tracker.list_issues", "input": {}},
                {"type": "data-elicitation-request", "id": event["elicitationId"], "data": event},
                {"type": "data-something-new", "data": {"ignored": True}},
            )
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=body)

    page.route("**/run/api/chat", chat)
    say(page, LIST_ISSUES)


def test_connect_signs_in_in_a_popup_and_the_call_completes(tracker_hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(tracker_hub)
    say(page, LIST_ISSUES)
    prompt = page.locator(".prompt-url")
    expect(prompt.locator(".prompt-message")).to_have_text(
        "Tracker requires authentication. Connect your account to continue."
    )
    expect(prompt.locator(".domain")).to_have_text(tracker_hub.url.removeprefix("http://"))
    screenshot(page, ".prompt-url", "url.png")
    popup = connect(page, prompt)
    expect(popup.get_by_role("heading")).to_contain_text("Allow elicithub demo")
    with popup.expect_event("close"):  # the callback page's message closes it
        popup.get_by_role("button", name="Allow").click()
    expect(prompt).to_have_attribute("data-state", "accepted")
    expect(prompt.get_by_role("button", name="Connect")).to_be_disabled()
    expect(page.locator(".message.assistant > .text")).to_contain_text("issue")
    expect(page.locator(".message.assistant > .text")).not_to_contain_text("Tool error")


def test_after_a_reload_the_sign_in_still_completes_and_its_result_shows(
    tracker_hub: RunningHub, open_page: OpenPage
) -> None:
    page = open_page(tracker_hub)
    ask(page, LIST_ISSUES, ".prompt-url")
    conversation = conversation_path(page)
    requests = Requests(page)
    reload(page)
    prompt = page.locator(".prompt-url")
    popup = connect(page, prompt)
    with popup.expect_event("close"):
        popup.get_by_role("button", name="Allow").click()
    expect(prompt).to_have_attribute("data-state", "accepted")
    # The run's stream went with the old page; the widget reads the run again and the result comes on that.
    result = page.locator(".message.assistant > .text", has_text="You have")
    expect(result).to_have_count(1)
    expect(result).to_contain_text("issue")
    expect(page.locator(".message.assistant > .text", has_text="Tool error")).to_have_count(0)
    expect(page.locator(".prompt")).to_have_count(1)
    assert requests.count("GET", conversation) == 1
    assert requests.count("GET", f"{conversation}/stream") == 1
    assert requests.count("POST", "/run/api/chat") == 0


def test_dismiss_ends_the_call_without_the_account(tracker_hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(tracker_hub)
    say(page, LIST_ISSUES)
    prompt = page.locator(".prompt-url")
    prompt.get_by_role("button", name="Dismiss").click()
    expect(prompt).to_have_attribute("data-state", "declined")
    expect(page.locator(".message.assistant > .text")).to_have_text(
        "Tool error: Authentication required but not provided."
    )
    assert len(page.context.pages) == 1


def test_only_http_links_have_a_target_and_the_host_is_what_is_shown(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    urls = [
        "https://auth.example.com/authorize?x=1",
        "http://127.0.0.1:8700/auth/connect?t=abc",
        "https://exämple.com/",
        "javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "not a url",
    ]
    targets = page.evaluate(
        """async (urls) => {
            const { linkTarget } = await import("./static/prompt.js");
            return urls.map((url) => linkTarget(url)?.host ?? null);
        }""",
        urls,
    )
    assert targets == ["auth.example.com", "127.0.0.1:8700", "xn--exmple-cua.com", None, None, None, None]


def test_a_url_prompt_names_the_domain_before_anything_opens_and_refuses_other_links(
    hub: RunningHub, open_page: OpenPage
) -> None:
    page = open_page(hub)
    render(page, url_event("https://auth.example.com/authorize?client_id=hub"))
    prompt = page.locator(".prompt-url")
    expect(prompt.locator(".prompt-domain")).to_have_text("Connect opens a page on auth.example.com")
    expect(prompt.get_by_role("button", name="Connect")).to_be_enabled()
    assert len(page.context.pages) == 1

    render(page, url_event("javascript:window.__pwned=1", "eli_js"))
    refused = page.locator(".prompt-url[data-elicitation-id=eli_js]")
    expect(refused.locator(".prompt-refused")).to_contain_text("javascript:window.__pwned=1")
    expect(refused.get_by_role("button", name="Connect")).to_have_count(0)
    expect(refused.locator("a")).to_have_count(0)
    refused.get_by_role("button", name="Dismiss").click()
    expect(refused).to_have_attribute("data-state", "declined")
    assert page.evaluate("window.__pwned") is None


def test_connect_opens_a_popup_and_only_the_hubs_own_message_completes_the_prompt(
    hub: RunningHub, open_page: OpenPage
) -> None:
    page = open_page(hub)
    stand_in_hub(page, url_event(f"{hub.url}/healthz?stand-in-for=auth-connect"), [])
    prompt = page.locator(".prompt-url")
    expect(prompt.locator(".domain")).to_have_text(hub.url.removeprefix("http://"))
    popup = connect(page, prompt)
    assert popup.url == f"{hub.url}/healthz?stand-in-for=auth-connect"
    expect(prompt.locator(".status")).to_have_text("Finish in the window that opened")

    done = {"type": "elicithub:auth-complete", "elicitationId": "eli_url", "outcome": "accepted"}
    # Another origin (localhost is not 127.0.0.1) cannot close the question. The popup navigates itself, as
    # the OAuth redirects will: a navigation typed into the address bar would cut it off from its opener.
    elsewhere = hub.url.replace("127.0.0.1", "localhost") + "/healthz"
    popup.evaluate("(url) => { window.location.href = url; }", elsewhere)
    popup.wait_for_url(elsewhere)
    popup.evaluate("(done) => window.opener.postMessage(done, '*')", done)
    page.wait_for_timeout(200)
    expect(prompt).to_have_attribute("data-state", "pending")

    popup.evaluate("(url) => { window.location.href = url; }", f"{hub.url}/healthz")
    popup.wait_for_url(f"{hub.url}/healthz")
    with popup.expect_event("close"):
        popup.evaluate("(done) => window.opener.postMessage(done, window.location.origin)", done)
    expect(prompt).to_have_attribute("data-state", "accepted")
    for button in prompt.get_by_role("button").all():
        expect(button).to_be_disabled()


def test_a_blocked_popup_falls_back_to_a_link(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    render(page, url_event("https://auth.example.com/authorize"))
    page.evaluate("window.open = () => null")
    page.get_by_role("button", name="Connect").click()
    link = page.get_by_role("link", name="Open the page on auth.example.com in a new tab")
    expect(link).to_have_attribute("href", "https://auth.example.com/authorize")
    expect(link).to_have_attribute("target", "_blank")


def test_dismiss_after_the_stream_ended_declines_through_the_chat(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    answers: list[dict[str, Any]] = []
    stand_in_hub(page, url_event("https://auth.example.com/authorize"), answers)
    # The stream broke off before the run's end, and the hub knows no such run to read again.
    expect(page.locator(".message.assistant .error")).to_have_text("The connection to the hub was lost.")
    prompt = page.locator(".prompt-url")
    prompt.get_by_role("button", name="Dismiss").click()
    expect(prompt).to_have_attribute("data-state", "declined")
    assert answers == [{"type": "elicitation-response", "elicitationId": "eli_url", "action": "decline"}]
