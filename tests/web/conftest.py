"""Fixtures for the web widget's tests: Debian's chromium driven by Playwright, pages signed in by cookie, and
what every browser test does with a page (say something, reload, render a prompt, check one closed)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect, sync_playwright

from elicithub.server.identity import SESSION_COOKIE
from tests.conftest import RunningHub

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-output" / "screenshots"
DOCS_SCREENSHOTS = REPO / "docs" / "screenshots"
READY = "body[data-ready=true]"
"""Set by the widget once it has restored its conversation (and reattached to a run still going)."""


def session_cookie(running: RunningHub, user: str) -> str:
    """The session cookie the hub itself would set for `user` (signed with its own key)."""
    return running.hub.identity.session_token(user)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # The browser tests are part of the suite: a machine without chromium fails them rather than skipping them.
    # One per module, not per session: while Playwright runs, its event loop counts as running in this thread, so a
    # later test of another module that runs a loop of its own (asyncio.run, the anyio plugin) would fail.
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing; install Debian's chromium (scripts/test does) to run the browser tests")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


NewContext = Callable[..., BrowserContext]
OpenPage = Callable[..., Page]


@pytest.fixture
def new_context(browser: Browser) -> Iterator[NewContext]:
    """Fresh browser contexts (no cookies, 10 s for anything awaited), closed after the test; anything a page of
    theirs raises, popups included, fails it."""
    contexts: list[BrowserContext] = []
    errors: list[str] = []

    def new(**options: Any) -> BrowserContext:
        context = browser.new_context(**options)
        context.set_default_timeout(10_000)
        context.on("page", lambda page: page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}")))
        contexts.append(context)
        return context

    yield new
    for context in contexts:
        context.close()
    assert not errors, f"a page raised: {errors}"


def open_widget(context: BrowserContext, url: str, path: str = "/") -> Page:
    """A new page of `context` with the widget at `url` + `path`, once it is ready."""
    page = context.new_page()
    page.goto(url + path)
    page.wait_for_selector(READY)
    return page


@pytest.fixture
def open_page(new_context: NewContext) -> OpenPage:
    """Open the widget of a hub in a fresh browser context, signed in as `user` through the session cookie."""

    def open_(running: RunningHub, user: str | None = "alice", **options: Any) -> Page:
        context = new_context(viewport={"width": 900, "height": 760}, **options)
        if user is not None:
            value = session_cookie(running, user)
            context.add_cookies([{"name": SESSION_COOKIE, "value": value, "url": running.url}])
        return open_widget(context, running.url)

    return open_


def reload(page: Page) -> None:
    """Reload the widget and wait until it is ready again."""
    page.reload()
    page.wait_for_selector(READY)


def say(page: Page, text: str) -> None:
    page.fill("#message", text)
    page.keyboard.press("Enter")


def ask(page: Page, command: str, prompt: str = ".prompt") -> None:
    """Say `command` and wait for the question it asks to show, pending."""
    say(page, command)
    expect(page.locator(prompt)).to_have_attribute("data-state", "pending")


def expect_closed(prompt: Locator, state: str) -> None:
    """The prompt shows `state` and none of its controls can be used any more."""
    expect(prompt).to_have_attribute("data-state", state)
    expect(prompt.locator(".status")).to_have_text(state.capitalize())
    for control in prompt.locator("input, select, button").all():
        expect(control).to_be_disabled()


def connect(page: Page, prompt: Locator) -> Page:
    """Press a url prompt's Connect: the popup it opens."""
    with page.expect_popup() as opened:
        prompt.get_by_role("button", name="Connect").click()
    return opened.value


def in_ten_minutes() -> str:
    return (datetime.now(UTC) + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")


def render(page: Page, event: dict[str, Any]) -> None:
    """Show a prompt through the widget's own render function; answers are recorded in window.__sent."""
    page.evaluate(
        """async (event) => {
            const { createPrompt } = await import("./static/prompt.js");
            window.__sent = [];
            const prompt = createPrompt(event, async (action, content) => {
                window.__sent.push({ action, content });
                return { accept: "accepted", decline: "declined", cancel: "cancelled" }[action];
            });
            document.getElementById("transcript").append(prompt.element);
        }""",
        event,
    )


class Requests:
    """The requests a page makes (across reloads), by method and path."""

    def __init__(self, page: Page) -> None:
        self.seen: list[tuple[str, str]] = []
        page.on("request", lambda request: self.seen.append((request.method, urlsplit(request.url).path)))

    def count(self, method: str, path: str) -> int:
        return self.seen.count((method, path))


def conversation_path(page: Page) -> str:
    """Where the hub serves the conversation the page shows (`/stream` after it: its run)."""
    conversation = page.evaluate("localStorage.getItem('elicithub.conversation')")
    return f"/run/api/conversations/{conversation}"


def screenshot(page: Page, selector: str | None, name: str, *, copy_to: Path | None = None) -> None:
    """The element at `selector` (None: the whole window) under test-output/, and also at `copy_to` if given."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    (page if selector is None else page.locator(selector)).screenshot(path=str(path))
    if copy_to is not None:
        copy_to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy_to)


def docs_copy(name: str) -> Path | None:
    """Where a screenshot also goes for the README: only with ELICITHUB_UPDATE_SCREENSHOTS=1, so that an ordinary
    test run leaves the tracked images alone."""
    return DOCS_SCREENSHOTS / name if os.environ.get("ELICITHUB_UPDATE_SCREENSHOTS") == "1" else None
