"""The hub as an OAuth client: discovery, registration, configured clients, and project-scoped credentials."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from elicithub.config import parse_config
from tests.auth.conftest import Browser, TrackerProcess, tracker_entry
from tests.auth.test_credential_flow import CALL, converse, stored
from tests.conftest import HubFactory, RunningHub, free_port


def test_discovery_finds_the_authorization_server_and_registers_once(
    auth_hub: RunningHub, tracker: TrackerProcess
) -> None:
    server = auth_hub.config.downstream_server("tracker")
    assert server is not None
    found = auth_hub.on_loop(auth_hub.hub.oauth.auth_server(server))
    assert found.issuer.rstrip("/") == tracker.base
    assert found.authorization_endpoint == f"{tracker.base}/authorize"
    assert found.token_endpoint == f"{tracker.base}/token"
    assert found.resource == tracker.url
    assert found.scope == "issues"

    async def register_twice() -> tuple[str, str]:
        first = await auth_hub.hub.oauth.registration(server, found)
        second = await auth_hub.hub.oauth.registration(server, found)
        return first.client_id, second.client_id

    first, second = auth_hub.on_loop(register_twice())
    assert first == second  # kept in the vault, not registered again


def test_an_unreachable_authorization_server_declines_with_a_clear_page(make_hub: HubFactory) -> None:
    hub = make_hub(
        mcp_servers=[
            {"id": "tracker", "url": "http://127.0.0.1:9/mcp", "credential_scope": "user", "tools": [{"name": "x"}]}
        ]
    )
    pages: list[httpx.Response] = []

    def open_link(event: dict[str, object], _: str) -> None:
        browser = Browser()
        pages.append(browser.open(str(event["url"])))
        browser.close()

    text, events = converse(hub, "/call tracker.x {}", open_link)
    assert pages[0].status_code == 502 and "Could not find the authorization server for Tracker" in pages[0].text
    assert events[-1]["outcome"] == "declined"
    assert text == "Tool error: Authentication required but not provided."


def register(tracker: TrackerProcess, port: int, method: str) -> dict[str, Any]:
    """Register a client at the tracker's authorization server, as an operator would before configuring it."""
    body = {
        "client_name": f"pre-registered ({method})",
        "redirect_uris": [f"http://127.0.0.1:{port}/auth/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    }
    registered: dict[str, Any] = httpx.post(f"{tracker.base}/register", json=body).json()
    return registered


def test_a_configured_client_is_used_instead_of_registering(
    make_hub: HubFactory, tracker: TrackerProcess, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    registered = register(tracker, port, "client_secret_post")
    monkeypatch.setenv("TRACKER_CLIENT_SECRET", registered["client_secret"])
    # Registered for client_secret_post, so configured so (the hub's own default would be client_secret_basic).
    oauth = {
        "client_id": registered["client_id"],
        "client_secret_env": "TRACKER_CLIENT_SECRET",
        "token_endpoint_auth_method": "client_secret_post",
    }
    hub = make_hub(port, mcp_servers=[tracker_entry(tracker, oauth=oauth)])
    text, events = converse(hub, CALL, lambda e, _: browser.sign_in(str(e["url"])))
    assert events[-1]["outcome"] == "accepted" and not text.startswith("Tool error")
    issuer = hub.on_loop(hub.hub.oauth.auth_server(hub.config.downstream_server("tracker"))).issuer  # type: ignore[arg-type]
    assert hub.on_loop(hub.hub.vault.client(issuer)) is None  # it never registered itself

    monkeypatch.delenv("TRACKER_CLIENT_SECRET")
    pages: list[httpx.Response] = []
    hub2 = make_hub(store={"url": "memory://"}, mcp_servers=[tracker_entry(tracker, oauth=oauth)])  # no token yet

    def open_link(event: dict[str, object], _: str) -> None:
        other = Browser()
        pages.append(other.open(str(event["url"])))
        other.close()

    converse(hub2, CALL, open_link)
    assert pages[0].status_code == 502 and "$TRACKER_CLIENT_SECRET" in pages[0].text


def test_config_for_credentials_is_checked() -> None:
    def error(server: dict[str, object]) -> str:
        try:
            parse_config({"mcp_servers": [{"id": "t", **server}]})
        except Exception as exc:
            return str(exc)
        return ""

    assert "credential_env: is required" in error({"url": "http://h/mcp", "credential_scope": "project"})
    assert "needs a url" in error({"command": ["x"], "credential_scope": "user"})
    assert "both authorization_endpoint and token_endpoint" in error(
        {"url": "http://h/mcp", "oauth": {"client_id": "c", "token_endpoint": "http://h/token"}}
    )
    assert "client_id: is required" in error(
        {"url": "http://h/mcp", "oauth": {"authorization_endpoint": "http://h/a", "token_endpoint": "http://h/t"}}
    )
    assert error({"url": "http://h/mcp", "credential_scope": "user", "oauth": {"scopes": ["a"]}}) == ""


def test_project_scope_uses_the_shared_token_and_says_when_it_is_missing(
    make_hub: HubFactory, tracker: TrackerProcess, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_hub = make_hub(mcp_servers=[tracker_entry(tracker)])
    converse(user_hub, CALL, lambda e, _: browser.sign_in(str(e["url"])))
    credential = stored(user_hub)
    assert credential is not None
    entry = {**tracker_entry(tracker), "credential_scope": "project", "credential_env": "TRACKER_TOKEN"}
    shared = make_hub(mcp_servers=[entry])
    text, events = converse(shared, CALL)
    assert events == [] and text == "Tool error: The hub has no credential for Tracker: set $TRACKER_TOKEN."
    monkeypatch.setenv("TRACKER_TOKEN", credential.access_token)
    before = tracker.stats()
    text, events = converse(shared, CALL, elicitation=False)  # no person needed for a project credential
    assert events == [] and not text.startswith("Tool error")
    assert tracker.stats()["unauthenticated"] == before["unauthenticated"]


def test_a_configured_confidential_client_uses_client_secret_basic_by_default(
    make_hub: HubFactory, tracker: TrackerProcess, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    registered = register(tracker, port, "client_secret_basic")
    monkeypatch.setenv("TRACKER_BASIC_SECRET", registered["client_secret"])
    oauth = {"client_id": registered["client_id"], "client_secret_env": "TRACKER_BASIC_SECRET"}
    hub = make_hub(port, mcp_servers=[tracker_entry(tracker, oauth=oauth)])
    text, events = converse(hub, CALL, lambda e, _: browser.sign_in(str(e["url"])))
    assert events[-1]["outcome"] == "accepted" and not text.startswith("Tool error")
