"""The widget's sign-in in Chromium: through the provider's own page and back, signed in as that person, for as long
as the provider keeps their session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.auth.oidc_provider import OidcProvider, oidc_provider
from tests.conftest import HubFactory, RunningHub, free_port


@pytest.fixture
def oidc() -> Iterator[OidcProvider]:
    with oidc_provider() as provider:
        yield provider


@pytest.fixture
def signing_hub(make_hub: HubFactory, oidc: OidcProvider) -> RunningHub:
    port = free_port()
    oidc.provider.register_web_client(f"http://127.0.0.1:{port}/auth/signed-in")
    return make_hub(port=port, auth={"oidc": oidc.config()})


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()


def sign_in_at_the_provider(page: Page, oidc: OidcProvider, hub: RunningHub, username: str) -> None:
    """From the provider's sign-in page back to the widget, ready."""
    page.wait_for_url(f"{oidc.base}/login*")
    page.fill("input[name=username]", username)
    page.click("button[type=submit]")
    page.wait_for_url(f"{hub.url}/")
    page.wait_for_selector("body[data-ready=true]")


def test_the_widget_signs_in_through_the_providers_page(
    signing_hub: RunningHub, oidc: OidcProvider, page: Page
) -> None:
    oidc.provider.names["alice"] = "Alice Liddell"
    page.goto(f"{signing_hub.url}/auth/session")
    assert "Not signed in" in page.inner_text("main")
    page.click("text=Sign in")
    sign_in_at_the_provider(page, oidc, signing_hub, "alice")
    expect(page.locator("#who")).to_have_text("Signed in as Alice Liddell")
    assert page.evaluate("fetch('/run/api/me').then(r => r.json())") == {"user": "alice", "name": "Alice Liddell"}
    assert page.evaluate("document.cookie") == ""  # the session is HTTP-only: the page holds no credential
    page.goto(f"{signing_hub.url}/auth/session")
    assert "Signed in as Alice Liddell." in page.inner_text("main")
    page.click("text=Sign out")
    page.wait_for_url(f"{signing_hub.url}/auth/session")
    assert "Not signed in" in page.inner_text("main")


def test_once_the_provider_refuses_the_refresh_the_widget_offers_the_sign_in_again(
    signing_hub: RunningHub, oidc: OidcProvider, page: Page
) -> None:
    oidc.provider.access_ttl_s = 0  # the hub asks the provider at the next request
    page.goto(f"{signing_hub.url}/auth/sign-in")
    sign_in_at_the_provider(page, oidc, signing_hub, "alice")
    expect(page.locator("#who")).to_have_text("Signed in as alice")
    oidc.provider.sign_out("alice")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    who = page.locator("#who")
    expect(who).to_have_text("Not signed in: Sign in")
    who.get_by_role("link", name="Sign in").click()
    sign_in_at_the_provider(page, oidc, signing_hub, "bob")
    expect(page.locator("#who")).to_have_text("Signed in as bob")
