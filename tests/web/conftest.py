"""Fixtures for the web widget's tests: Debian's chromium driven by Playwright, and pages signed in by cookie."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from elicithub.server.identity import SESSION_COOKIE
from tests.conftest import RunningHub

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-output" / "screenshots"
DOCS_SCREENSHOTS = REPO / "docs" / "screenshots"


def session_cookie(running: RunningHub, user: str) -> str:
    """The session cookie the hub itself would set for `user` (signed with its own key)."""
    return running.hub.identity.session_token(user)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    # The browser tests are part of the suite: a machine without chromium fails them rather than skipping them.
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing; install Debian's chromium (scripts/test does) to run the browser tests")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


OpenPage = Callable[..., Page]


@pytest.fixture
def open_page(browser: Browser) -> Iterator[OpenPage]:
    """Open the widget of a hub in a fresh browser context, signed in as `user` through the session cookie."""
    contexts = []
    errors: list[str] = []

    def open_(running: RunningHub, user: str | None = "alice", **options: Any) -> Page:
        context = browser.new_context(viewport={"width": 900, "height": 760}, **options)
        context.set_default_timeout(10_000)
        if user is not None:
            value = session_cookie(running, user)
            context.add_cookies([{"name": SESSION_COOKIE, "value": value, "url": running.url}])
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(running.url + "/")
        page.wait_for_selector("body[data-ready=true]")
        return page

    yield open_
    for context in contexts:
        context.close()
    assert not errors, f"the page raised: {errors}"


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


def screenshot(page: Page, selector: str, name: str, *, copy_to: Path | None = None) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.locator(selector).screenshot(path=str(path))
    if copy_to is not None:
        copy_to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy_to)


def docs_copy(name: str) -> Path | None:
    """Where a screenshot also goes for the README: only with ELICITHUB_UPDATE_SCREENSHOTS=1, so that an ordinary
    test run leaves the tracked images alone."""
    return DOCS_SCREENSHOTS / name if os.environ.get("ELICITHUB_UPDATE_SCREENSHOTS") == "1" else None
