"""The widget's sign-in in Chromium: through the provider's own page and back, signed in as that person."""

from __future__ import annotations

from playwright.sync_api import Browser

from tests.auth.oidc_provider import oidc_provider
from tests.conftest import HubFactory, free_port


def test_the_widget_signs_in_through_the_providers_page(make_hub: HubFactory, browser: Browser) -> None:
    with oidc_provider() as oidc:
        port = free_port()
        oidc.provider.register_web_client(f"http://127.0.0.1:{port}/auth/signed-in")
        hub = make_hub(port=port, auth={"oidc": oidc.config()})
        context = browser.new_context()
        context.set_default_timeout(10_000)
        try:
            page = context.new_page()
            page.goto(f"{hub.url}/auth/session")
            assert "Not signed in" in page.inner_text("main")
            page.click("text=Sign in")
            page.wait_for_url(f"{oidc.base}/login*")
            page.fill("input[name=username]", "alice")
            page.click("button[type=submit]")
            page.wait_for_url(f"{hub.url}/")
            page.wait_for_selector("body[data-ready=true]")
            assert page.evaluate("fetch('/run/api/me').then(r => r.json())") == {"user": "alice"}
            assert page.evaluate("document.cookie") == ""  # the session is HTTP-only: the page holds no credential
            page.goto(f"{hub.url}/auth/session")
            assert "Signed in as alice." in page.inner_text("main")
            page.click("text=Sign out")
            page.wait_for_url(f"{hub.url}/auth/session")
            assert "Not signed in" in page.inner_text("main")
        finally:
            context.close()
