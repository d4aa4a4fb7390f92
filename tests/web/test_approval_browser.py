"""An approval in the chat in a real browser, against a real hub and a real SDK MCP server: the requester who approves
their own calls gets the inbox's approval card (who asks, the tool, the deadline, the arguments shown, a reason,
Approve and Deny, the arguments to edit), from the one module both pages load."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.conftest import HubFactory, RunningHub
from tests.triggers.approving import PEOPLE, RESTART, USERS, OpsServer
from tests.web.conftest import OpenPage, say

CARD = "/static/approval"
"""The approval card's script and stylesheet (`.js`, `.css`): one module, loaded by the chat and by the inbox."""


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


@pytest.fixture
def own_approvals(make_hub: HubFactory, ops: OpsServer) -> RunningHub:
    """A hub where a requester approves their own ops calls (the default approvers) and may edit them; carol reads
    the audit."""
    return make_hub(
        users=USERS,
        admins=["carol"],
        mcp_servers=[{"id": "ops", "url": ops.url}],
        approvals=[{"tools": ["ops.*"], "allow_edit": True}],
    )


def card(page: Page) -> Locator:
    """The approval card of `page` once it shows, pending."""
    approval = page.locator(".prompt", has_text="alice asks to call ops.restart. Approve this call?")
    expect(approval).to_have_attribute("data-state", "pending")
    return approval


def loaded(page: Page) -> set[str]:
    """The paths of the scripts and stylesheets the page has loaded."""
    names: list[str] = page.evaluate("performance.getEntriesByType('resource').map((r) => new URL(r.name).pathname)")
    return set(names)


def audited(hub: RunningHub) -> list[dict[str, object]]:
    headers = {"authorization": f"Bearer {PEOPLE['carol']}"}
    records: list[dict[str, object]] = httpx.get(f"{hub.url}/run/api/audit", headers=headers).json()["records"]
    return records


def test_the_chat_shows_an_approval_as_the_inbox_card_and_approves_it_edited_with_a_reason(
    own_approvals: RunningHub, ops: OpsServer, open_page: OpenPage
) -> None:
    page = open_page(own_approvals, "alice")
    say(page, RESTART)
    approval = card(page)
    about = approval.locator(".prompt-about dd")
    expect(about.nth(0)).to_have_text("alice")
    expect(about.nth(1)).to_have_text("ops.restart")
    expect(about.nth(2).locator("time")).to_have_attribute("datetime", pending_deadline(own_approvals))
    assert json.loads(approval.locator(".prompt-arguments").inner_text()) == {"service": "orders", "replicas": 2}
    buttons = [b.strip() for b in approval.get_by_role("button").all_inner_texts()]
    assert buttons == ["Approve", "Deny"]
    expect(approval.get_by_label("Approve this call")).to_have_count(0)
    expect(approval.locator("details")).to_have_count(0)  # nothing folded away
    expect(approval.locator(".prompt-source")).to_have_count(0)  # the tool line says who asks
    assert {f"{CARD}.js", f"{CARD}.css"} <= loaded(page)

    approval.get_by_label("Replicas").fill("3")
    approval.get_by_label("Reason").fill("during the window")
    approval.get_by_role("button", name="Approve").click()
    expect(approval).to_have_attribute("data-state", "accepted")
    expect(approval.locator(".status")).to_have_text("Approved")
    expect(page.locator(".tool details pre").last).to_have_text("Restarted orders with 3 replicas.")
    assert ops.calls == [{"service": "orders", "replicas": 3}]
    [record] = audited(own_approvals)
    assert (record["outcome"], record["reason"], record["answeredBy"]) == ("approved", "during the window", "alice")


def test_the_chats_card_denies_with_the_reason_and_a_bad_edit_shows_at_its_field(
    own_approvals: RunningHub, ops: OpsServer, open_page: OpenPage
) -> None:
    page = open_page(own_approvals, "alice")
    say(page, RESTART)
    approval = card(page)
    approval.get_by_label("Replicas").fill("11")
    approval.get_by_role("button", name="Approve").click()
    error = approval.locator(".field", has=page.get_by_label("Replicas")).locator(".field-error")
    expect(error).to_have_text("must be at most 10")
    expect(approval).to_have_attribute("data-state", "pending")

    approval.get_by_label("Reason").fill("not this week")
    approval.get_by_role("button", name="Deny").click()
    expect(approval.locator(".status")).to_have_text("Denied")
    refusal = "Call of ops.restart was not approved: denied by alice: not this week"
    expect(page.locator(".tool details pre").last).to_have_text(refusal)
    assert ops.calls == []


def test_a_card_answered_on_another_page_says_answered_not_what_it_does_not_know(
    own_approvals: RunningHub, open_page: OpenPage
) -> None:
    chat = open_page(own_approvals, "alice")
    say(chat, RESTART)
    shown = card(chat)
    inbox = chat.context.new_page()
    inbox.goto(f"{own_approvals.url}/inbox")
    item = card(inbox)
    assert {f"{CARD}.js", f"{CARD}.css"} <= loaded(inbox)  # the same card, from the same files
    item.get_by_label("Reason").fill("not now")
    item.get_by_role("button", name="Deny").click()
    expect(inbox.locator("#items .item")).to_have_count(0)
    # The chat learns that the approval was answered, not whether it was approved: the tool's result says that.
    expect(shown).to_have_attribute("data-state", "accepted")
    expect(shown.locator(".status")).to_have_text("Answered")
    refusal = "Call of ops.restart was not approved: denied by alice: not now"
    expect(chat.locator(".tool details pre").last).to_have_text(refusal)


def pending_deadline(hub: RunningHub) -> str:
    headers = {"authorization": f"Bearer {PEOPLE['alice']}"}
    [question] = httpx.get(f"{hub.url}/run/api/inbox", headers=headers).json()["questions"]
    deadline: str = question["expiresAt"]
    return deadline
