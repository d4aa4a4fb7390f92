"""The README's first command in a real browser: `elicithub serve` with no config, its page, and both kinds of question.

The hub runs as the real command in a subprocess (cwd a temporary directory, so `.elicithub/` lands there) and
the page is opened with no cookie and no bearer token: the demo signs its dev user in by itself.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect
from playwright.sync_api import Error as PlaywrightError

from tests.conftest import free_port
from tests.web.conftest import NewContext, connect, docs_copy, expect_closed, open_widget, say, screenshot

DEPLOY = '/call deploy.deploy_service {"service":"orders"}'
ROLLBACK = '/call release.rollback {"service":"orders"}'
MIGRATE = '/call deploy.migrate {"database": "orders-db"}'
LIST_ISSUES = "/call tracker.list_issues {}"
ISSUES = "You have 3 issues:"
DEFAULT_PORT = 8700
ANY = re.compile(r".*")
KEEP_POPUPS_OPEN = """
if (location.pathname === "/") {
  const open = window.open.bind(window);
  window.open = (...args) => {
    const opened = open(...args);
    const keep = (target, key) => (key === "close" ? () => {} : target[key]);
    return opened && new Proxy(opened, { get: keep });
  };
}
"""


class DemoHub:
    """`python -m elicithub.cli serve --port PORT` in `workdir`, with its output kept for a failure's message."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = workdir / "serve.log"
        command = [sys.executable, "-m", "elicithub.cli", "serve", "--port", str(port)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)
        self._wait_until_listening(timeout=30)

    def _wait_until_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"elicithub serve exited with {self.process.returncode}:\n{self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        pytest.fail(f"elicithub serve did not listen on {self.url} within {timeout:g} s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoHub]:
    workdir = tmp_path_factory.mktemp("serve")
    # The README's pictures show the address the README names.
    hub = DemoHub(workdir, DEFAULT_PORT if docs_copy("url.png") is not None else free_port())
    yield hub
    hub.stop()
    assert (workdir / ".elicithub").is_dir(), "serve with no config keeps its state under ./.elicithub/"


@pytest.fixture
def context(new_context: NewContext) -> BrowserContext:
    """A fresh browser with no cookies, sized as the README's screenshots are."""
    return new_context(viewport={"width": 1000, "height": 700})


def snapshot(page: Page, name: str, docs_name: str, *, height: int = 700) -> None:
    """The window at 1000 x `height`; also the README's image when asked to update those."""
    page.set_viewport_size({"width": 1000, "height": height})
    page.locator("#message").blur()  # no focus ring or caret in the picture
    screenshot(page, None, name, copy_to=docs_copy(docs_name))
    page.set_viewport_size({"width": 1000, "height": 700})


def test_the_demo_signs_in_by_itself_and_its_forms_finish_their_tool_calls(
    demo: DemoHub, context: BrowserContext
) -> None:
    page = open_widget(context, demo.url)
    expect(page.locator("#who")).to_have_text("Signed in as dev")
    say(page, "hello")
    help_text = page.locator(".message.assistant > .text")
    for tool in ("tracker.list_issues", "deploy.deploy_service", "deploy.migrate", "release.rollback"):
        expect(help_text).to_contain_text(tool)

    # 2026-07-28: the deploy server answers the first call with an InputRequiredResult holding this form.
    page.get_by_role("button", name="New conversation").click()
    say(page, DEPLOY)
    prompt = page.locator(".prompt")
    expect(prompt.locator(".prompt-message")).to_have_text("How should orders be deployed?")
    region = prompt.get_by_label("Region")
    expect(region).to_have_attribute("aria-required", "true")
    titles = [t.strip() for t in region.locator("option").all_inner_texts()]
    assert titles == ["Choose…", "Europe (Ireland)", "US East (Virginia)", "Asia Pacific (Sydney)"]
    features = prompt.locator("fieldset", has_text="Features")
    expect(features.get_by_role("checkbox")).to_have_count(3)
    replicas = prompt.get_by_label("Replicas")
    expect(replicas).to_have_value("2")
    expect(replicas).to_have_attribute("min", "1")
    expect(replicas).to_have_attribute("max", "10")
    confirm = prompt.get_by_label("I understand this deploys to production")
    expect(confirm).to_have_attribute("aria-required", "true")
    expect(confirm).not_to_be_checked()
    snapshot(page, "demo-form.png", "form.png", height=900)  # tall enough for the whole conversation

    prompt.get_by_role("button", name="Submit").click()  # no region yet: the browser holds the answer back
    region_error = prompt.locator(".field", has=page.get_by_label("Region")).locator(".field-error")
    expect(region_error).to_have_text("is required")
    expect(prompt).to_have_attribute("data-state", "pending")

    region.select_option(label="Europe (Ireland)")
    features.get_by_label("canary").check()
    features.get_by_label("tracing").check()
    replicas.fill("3")
    confirm.check()
    prompt.get_by_role("button", name="Submit").click()
    result = page.locator(".message.assistant > .text", has_text="Deployed orders")
    expect(result).to_have_text("Deployed orders to eu-west-1 with 3 replicas (canary, tracing).")
    expect_closed(prompt, "accepted")

    # The demo's approval policy: the group ops approves a rollback, and the dev user, its member, may approve their
    # own. Then the release server (2025-11-25) sends elicitation/create while the call is open.
    page.get_by_role("button", name="New conversation").click()
    say(page, ROLLBACK)
    approval = page.locator(".prompt", has_text="dev asks to call release.rollback. Approve this call?")
    # The card the inbox shows: who asks, the tool, the deadline, the arguments shown, a reason, Approve and Deny.
    about = approval.locator(".prompt-about dd")
    expect(about).to_have_count(3)
    expect(about.nth(0)).to_have_text("dev")
    expect(about.nth(1)).to_have_text("release.rollback")
    assert json.loads(approval.locator(".prompt-arguments").inner_text()) == {"service": "orders"}
    assert [b.strip() for b in approval.get_by_role("button").all_inner_texts()] == ["Approve", "Deny"]
    expect(approval.get_by_label("Approve this call")).to_have_count(0)
    reason = approval.get_by_label("Reason")
    reason.fill("the canary is failing")
    reason.blur()
    snapshot(page, "demo-approval.png", "approval.png")
    approval.get_by_role("button", name="Approve").click()
    expect(approval.locator(".status")).to_have_text("Approved")
    expect(approval.get_by_role("button", name="Approve")).to_be_disabled()
    rollback = page.locator(".prompt", has_text="Roll orders back to the previous release?")
    rollback.get_by_label("Roll back to the previous release").check()
    rollback.get_by_role("button", name="Submit").click()
    expect(page.locator(".message.assistant > .text", has_text="Rolled orders")).to_have_text(
        "Rolled orders back to the previous release."
    )
    expect_closed(rollback, "accepted")


def test_the_inbox_and_the_admins_page_opened_first_sign_the_dev_user_in_and_the_dev_user_is_an_admin(
    demo: DemoHub, new_context: NewContext, context: BrowserContext
) -> None:
    chat = open_widget(context, demo.url)
    say(chat, ROLLBACK)
    shown = chat.locator(".prompt", has_text="dev asks to call release.rollback. Approve this call?")
    expect(shown).to_have_attribute("data-state", "pending")

    # Another browser, never on the chat page: the admin's page signs it in as the dev user, an admin.
    admin = new_context(viewport={"width": 1100, "height": 420}).new_page()
    admin.goto(f"{demo.url}/admin")
    expect(admin.locator("#who")).to_have_text("Signed in as dev")
    row = admin.locator("#questions tbody tr", has_text="rollback")
    expect(row.locator("td")).to_have_text([ANY, "dev", "chat", "approval", "release", "rollback", "form", ANY, ANY])

    # And another: the inbox signs it in as the dev user too, and shows the approval as the chat's card.
    inbox = new_context(viewport={"width": 1000, "height": 700}).new_page()
    inbox.goto(f"{demo.url}/inbox")
    expect(inbox.locator("#who")).to_have_text("Signed in as dev")
    item = inbox.locator("#items .item", has_text="dev asks to call release.rollback. Approve this call?")
    expect(item.locator(".prompt-about dd").nth(1)).to_have_text("release.rollback")
    item.get_by_label("Reason").fill("from the inbox")
    item.get_by_role("button", name="Approve").click()
    expect(item).to_have_count(0)
    expect(shown.locator(".status")).to_have_text("Answered")
    expect(chat.locator(".prompt", has_text="Roll orders back to the previous release?")).to_have_attribute(
        "data-state", "pending"
    )


def test_the_tracker_is_connected_in_a_consent_popup_and_then_answers_without_asking(
    demo: DemoHub, context: BrowserContext
) -> None:
    # The widget closes the popup as soon as it learns the outcome, which is often before the callback page has
    # even arrived; here the page's handle on the popup cannot close it, so the test reads what a person would.
    context.add_init_script(KEEP_POPUPS_OPEN)
    page = open_widget(context, demo.url)
    expect(page.locator("#who")).to_have_text("Signed in as dev")

    say(page, LIST_ISSUES)
    denied = page.locator(".prompt-url").nth(0)
    expect(denied.locator(".prompt-message")).to_have_text(
        "Tracker requires authentication. Connect your account to continue."
    )
    expect(denied.locator(".prompt-domain")).to_have_text(f"Connect opens a page on 127.0.0.1:{demo.port}")
    expect(denied.get_by_role("button", name="Connect")).to_be_enabled()
    snapshot(page, "demo-url.png", "url.png")

    callback = consent(page, denied, "Deny")
    expect_closed(denied, "declined")
    expect(page.locator(".message.assistant > .text").last).to_have_text(
        "Tool error: Authentication required but not provided."
    )
    assert callback is None or "you did not allow access" in callback

    say(page, LIST_ISSUES)
    allowed = page.locator(".prompt-url").nth(1)
    callback = consent(page, allowed, "Allow")
    assert callback is None or "Connected — you can close this window" in callback
    expect_closed(allowed, "accepted")
    expect(page.locator(".message.assistant > .text").last).to_contain_text(ISSUES)

    say(page, LIST_ISSUES)  # connected now: the call goes straight through
    expect(page.locator(".message.assistant > .text", has_text=ISSUES)).to_have_count(2)
    expect(page.locator(".prompt")).to_have_count(2)
    assert len(context.pages) == 1


def consent(page: Page, prompt: Locator, decision: str) -> str | None:
    """Connect, answer the tracker's consent page in the popup, and return what the hub's callback page says
    (None if that page closed itself first)."""
    popup = connect(page, prompt)
    expect(popup.get_by_role("heading")).to_have_text("Allow elicithub demo to read your issues?")
    popup.get_by_role("button", name=decision).click()
    expect(prompt).not_to_have_attribute("data-state", "pending")
    try:
        popup.wait_for_url(lambda url: urlsplit(url).path == "/auth/callback")
        text = popup.locator("main").inner_text()
    except PlaywrightError:
        if not popup.is_closed():
            raise
        return None
    popup.close()
    return text


def test_the_demo_planner_delegates_to_the_travel_a2a_agent_whose_question_reaches_the_page(
    demo: DemoHub, context: BrowserContext
) -> None:
    page = open_widget(context, demo.url)
    book = "/call travel.send_message " + json.dumps({"message": "Lisbon on Friday"})
    say(page, "/call planner.delegate " + json.dumps({"message": book}))
    prompt = page.locator(".prompt", has_text="Which city are you flying from?")
    expect(prompt.locator(".prompt-source")).to_have_text("Asked by assistant → planner · travel")
    prompt.get_by_role("textbox").fill("Porto")
    prompt.get_by_role("button", name="Submit").click()
    result = page.locator(".message.assistant > .text", has_text="Booked a flight")
    expect(result).to_have_text("Booked a flight from Porto for: Lisbon on Friday.")
    expect_closed(prompt, "accepted")


def test_the_demo_migration_runs_as_a_task_that_pauses_for_confirmation_and_finishes(
    demo: DemoHub, context: BrowserContext
) -> None:
    page = open_widget(context, demo.url)
    say(page, MIGRATE)
    prompt = page.locator(".prompt", has_text="Apply 3 pending migrations to orders-db?")
    expect(prompt).to_have_attribute("data-state", "pending")
    source = re.compile(r"^Asked by deploy · migrate · task [0-9a-f]{12}$")
    expect(prompt.locator(".prompt-source")).to_have_text(source)
    apply = prompt.get_by_label("Apply 3 pending migrations")
    expect(apply).not_to_be_checked()
    snapshot(page, "demo-task.png", "task.png")

    apply.check()
    prompt.get_by_role("button", name="Submit").click()
    result = page.locator(".message.assistant > .text", has_text="Migrated")
    expect(result).to_have_text("Migrated orders-db: 3 migrations applied.")
    expect_closed(prompt, "accepted")


def test_a_new_conversation_offers_the_demo_calls_as_buttons_that_send_them(
    demo: DemoHub, context: BrowserContext
) -> None:
    page = open_widget(context, demo.url)
    offered = page.get_by_role("group", name="Try")
    labels = [label.strip() for label in offered.get_by_role("button").all_inner_texts()]
    assert labels[:5] == [
        "Deploy a service",
        "Migrate a database",
        "Roll back a release",
        "Connect my tracker",
        "Book a trip through the planner",
    ]
    snapshot(page, "demo-suggestions.png", "suggestions.png", height=400)

    offered.get_by_role("button", name="Deploy a service").click()
    expect(page.locator(".message.user .text")).to_have_text(DEPLOY)
    prompt = page.locator(".prompt")
    expect(prompt.locator(".prompt-message")).to_have_text("How should orders be deployed?")
    expect(prompt).to_have_attribute("data-state", "pending")

    page.get_by_role("button", name="New conversation").click()
    offered = page.get_by_role("group", name="Try")
    offered.get_by_role("button", name="Roll back a release").click()
    expect(page.locator(".message.user .text")).to_have_text(ROLLBACK)
    approval = page.locator(".prompt", has_text="dev asks to call release.rollback. Approve this call?")
    expect(approval).to_have_attribute("data-state", "pending")  # the demo's policy asks its approval first
