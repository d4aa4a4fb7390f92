"""A mail's links in Chromium: a scanner that opens a link in a browser answers nothing, and the page loads nothing but
itself and its stylesheet; a person approves (with an edit) or denies (with a reason) by pressing the page's button,
with JavaScript off; a person's own question has its form on the page. The screenshots of the mail and of its page
are the Email docs' (docs/email.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.surfaces.email.conftest import EmailHub, EmailHubs, links, parts
from tests.surfaces.email.mailserver import MailServer
from tests.surfaces.pages.inboxes import listed
from tests.triggers.approving import PEOPLE, RESTART, OpsServer, Requester, audit_record, policy, tool_output
from tests.web.conftest import NewContext, docs_copy, screenshot

ROLLBACK = '/call ops.rollback {"service": "orders"}'


@pytest.fixture
def mail() -> Iterator[MailServer]:
    server = MailServer()
    yield server
    server.stop()


@pytest.fixture
def email_hub(mail: MailServer, tmp_path: Path) -> Iterator[EmailHub]:
    ops = OpsServer()
    with ops.served() as app:
        ops.url = f"{app.url}/mcp"
        hubs = EmailHubs(mail, ops, tmp_path)
        yield hubs
        hubs.stop()


def open_link(new_context: NewContext, url: str, *, javascript: bool = False) -> tuple[Page, list[str]]:
    """The link's page in a fresh browser (JavaScript off unless asked), and every URL it requested."""
    page = new_context(viewport={"width": 760, "height": 900}, java_script_enabled=javascript).new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(url)
    page.wait_for_load_state("networkidle")
    return page, requested


def test_a_scanner_with_a_browser_opens_a_link_and_nothing_is_answered(
    email_hub: EmailHub, mail: MailServer, new_context: NewContext
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-scanner", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        mail.wait(2)
        bob = links(mail.to("bob@acme.test")[0])
        for url in bob.values():
            page, requested = open_link(new_context, url, javascript=True)  # a scanner's browser runs scripts
            expect(page.locator("main")).to_have_attribute("data-state", "pending")
            own = urlsplit(hub.url).netloc
            assert {urlsplit(r).netloc for r in requested} == {own}  # nothing from anywhere else
            assert [urlsplit(r).path for r in requested] == [urlsplit(url).path, "/static/email.css"]
        assert len(listed(hub.url, PEOPLE["bob"])) == 1  # still open
        page.get_by_label("Reason").fill("not now")
        page.get_by_role("button", name="Deny").click()
        expect(page.locator(".status")).to_have_text("Denied by bob: not now.")
        assert tool_output(alice.rest())[1] is True
    assert audit_record(hub.url, pending["id"])["channel"] == "email"


def test_a_person_approves_with_an_edit_by_pressing_the_pages_button_without_javascript(
    email_hub: EmailHub, mail: MailServer, new_context: NewContext
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-browser", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        mail.wait(2)
        carol = mail.to("carol@acme.test")[0]
        shown = new_context(viewport={"width": 640, "height": 720}).new_page()
        shown.set_content(parts(carol)[1])  # the mail as a mail client shows its HTML
        screenshot(shown, None, "email-mail.png", copy_to=docs_copy("email-mail.png"))
        page, _ = open_link(new_context, links(carol)["approve"])
        expect(page.get_by_role("heading")).to_have_text("Approve this call?")
        expect(page.get_by_label("Replicas")).to_have_value("2")
        screenshot(page, None, "email-page.png", copy_to=docs_copy("email-page.png"))
        page.get_by_label("Replicas").fill("3")
        page.get_by_label("Reason").fill("during the window")
        page.get_by_role("button", name="Approve").click()
        expect(page.get_by_role("heading")).to_have_text("This approval has ended")
        expect(page.locator(".status")).to_have_text("Approved by carol: during the window.")
        assert tool_output(alice.rest()) == ("Restarted orders with 3 replicas.", False)
    record = audit_record(hub.url, pending["id"])
    assert (record["answeredBy"], record["channel"], record["reason"]) == ("carol", "email", "during the window")
    page.reload()  # the page says how it ended, and nothing is posted again
    expect(page.locator(".status")).to_have_text("Approved by carol: during the window.")
    expect(page.locator("form")).to_have_count(0)


def test_a_persons_own_question_has_its_form_on_the_page(
    email_hub: EmailHub, mail: MailServer, new_context: NewContext
) -> None:
    hub = email_hub(policy(tools=["ops.restart"]), email={"questions": True, "notify_after_s": 0})
    with Requester(hub.url, "alice", "conv-own-browser", ROLLBACK) as alice:
        alice.until("data-elicitation-request")
        [mailed] = mail.wait(1)
        page, _ = open_link(new_context, links(mailed)["answer"])
        expect(page.get_by_role("heading")).to_have_text("Your answer is needed")
        page.get_by_label("Confirm").check()
        page.get_by_role("button", name="Submit").click()
        expect(page.locator(".status")).to_have_text("Answered.")
        assert tool_output(alice.rest()) == ("Rolled orders back.", False)
