"""The admin's page in a real browser against a real hub: every user's open questions, filtered, one cancelled
(its person's widget shows it cancelled and the run going on); anyone else is told they are not an admin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from elicithub.server.identity import SESSION_COOKIE
from tests.conftest import USERS, HubFactory, RunningHub
from tests.web.conftest import NewContext, OpenPage, ask, docs_copy, expect_closed, screenshot, session_cookie

ADMIN = {"id": "carol", "token": "carol-secret"}
WHEN = re.compile(r"\S")
"""A time, as the browser's locale writes it."""


@pytest.fixture
def admin_hub(make_hub: HubFactory) -> RunningHub:
    return make_hub(users=[*USERS, ADMIN], admins=["carol"])


def open_admin(new_context: NewContext, hub: RunningHub, user: str | None) -> Page:
    """The page /admin in a fresh browser signed in as `user` (None: no one)."""
    context: BrowserContext = new_context(viewport={"width": 1100, "height": 420})
    if user is not None:
        context.add_cookies([{"name": SESSION_COOKIE, "value": session_cookie(hub, user), "url": hub.url}])
    page = context.new_page()
    page.goto(f"{hub.url}/admin")
    return page


def test_an_admin_sees_every_users_open_questions_filters_them_and_cancels_one(
    admin_hub: RunningHub, open_page: OpenPage, new_context: NewContext
) -> None:
    alice = open_page(admin_hub, "alice")
    ask(alice, '/call mrtr.provision {"name":"orders"}')
    bob = open_page(admin_hub, "bob")
    ask(bob, '/call mrtr.provision {"name":"search"}')

    page = open_admin(new_context, admin_hub, "carol")
    expect(page.locator("#who")).to_have_text("Signed in as carol")
    rows = page.locator("#questions tbody tr[data-elicitation-id]")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td")).to_have_text(
        [WHEN, "bob", "chat", "mcp_elicitation", "mrtr", "provision", "form", WHEN, "Cancel"]
    )
    expect(rows.nth(1).locator("td").nth(1)).to_have_text("alice")
    expect(page.locator("#status")).to_contain_text("2 open questions")
    assert "Which region" not in page.inner_text("body")  # never what is asked
    screenshot(page, None, "admin.png", copy_to=docs_copy("admin.png"))

    page.fill("input[name=user]", "alice")
    page.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(1)
    expect(rows.nth(0).locator("td").nth(1)).to_have_text("alice")
    page.fill("input[name=user]", "dave")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#questions tbody")).to_have_text("No open questions.")

    # Bob answers while the page, no longer refreshing, still shows his question: its cancel is refused.
    page.get_by_label("Refresh every 5 s").uncheck()
    page.fill("input[name=user]", "")
    page.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(2)
    bobs = bob.locator(".prompt")
    bobs.get_by_label("Region").select_option("eu-west-1")
    bobs.get_by_role("button", name="Submit").click()
    expect_closed(bobs, "accepted")
    rows.nth(0).get_by_role("button", name="Cancel").click()
    expect(page.locator("#notice")).to_contain_text("Not cancelled: ")
    expect(page.locator("#notice")).to_contain_text("was already accepted.")
    expect(rows).to_have_count(1)

    rows.nth(0).get_by_role("button", name="Cancel").click()
    expect(page.locator("#notice")).to_have_text("Cancelled a question of alice's.")
    expect(page.locator("#questions tbody")).to_have_text("No open questions.")
    # Alice's widget: her question ended cancelled, and the run went on to say so.
    expect_closed(alice.locator(".prompt"), "cancelled")
    stopped = "Tool error: Provisioning of orders stopped: the user chose cancel."
    expect(alice.locator(".message.assistant > .text", has_text=stopped)).to_have_count(1)


def test_anyone_else_is_told_they_are_not_an_admin(admin_hub: RunningHub, new_context: NewContext) -> None:
    page = open_admin(new_context, admin_hub, "bob")
    refused = page.locator("#refused")
    expect(refused).to_have_text("bob is not an admin of this hub. Only its admins see every user's open questions.")
    expect(page.locator("#questions")).to_be_hidden()
    nobody = open_admin(new_context, admin_hub, None)
    expect(nobody.locator("#refused")).to_have_text("Sign in as an admin of this hub to see its open questions.")
    expect(nobody.locator("#filters")).to_be_hidden()
