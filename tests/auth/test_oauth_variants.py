"""The hub signs in to protected MCP servers the way MCP 2025-11-25 authorization says, whatever shape their
authorization server takes (see tests/auth/variants.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.auth.conftest import Browser
from tests.auth.test_credential_flow import converse, requests_of
from tests.auth.variants import Variant, VariantServer, serving
from tests.conftest import HubFactory, RunningHub, free_port

WHOAMI = "/call variant.whoami {}"
ADMIN = "/call variant.admin_report {}"


def entry(server: VariantServer, **extra: Any) -> dict[str, Any]:
    tools = [{"name": "whoami"}, {"name": "admin_report"}]
    return {"id": "variant", "url": server.url, "credential_scope": "user", "tools": tools, **extra}


def sign_ins(hub: RunningHub, text: str, browser: Browser) -> tuple[str, list[dict[str, Any]]]:
    """Chat `text`, signing in with Allow at every url question; the reply and the questions asked."""
    reply, events = converse(hub, text, lambda e, _: browser.sign_in(str(e["url"])))
    return reply, requests_of(events)


@pytest.fixture
def variant(request: pytest.FixtureRequest) -> Iterator[VariantServer]:
    with serving(request.param) as server:
        yield server


@pytest.mark.parametrize("variant", [Variant(prm_path="/meta/resource.json")], indirect=True)
def test_metadata_found_only_through_the_challenge(
    make_hub: HubFactory, variant: VariantServer, browser: Browser
) -> None:
    hub = make_hub(mcp_servers=[entry(variant)])
    reply, asked = sign_ins(hub, WHOAMI, browser)
    assert reply == "hello from the variant" and len(asked) == 1
    assert variant.seen.rejected["initialize"] >= 1  # the probe read the challenge...
    assert variant.seen.rejected["tools/call"] == 0  # ...and no tool was ever called without a token
    assert variant.seen.tool_calls["whoami"] == 1


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        (Variant(prm_scopes=["issues", "admin"], challenge_scope="issues"), ["issues"]),  # the challenge first
        (Variant(prm_scopes=["issues", "admin"]), ["issues", "admin"]),  # then what the resource supports
        (Variant(prm_scopes=None), None),  # else no scope parameter at all
    ],
    indirect=["variant"],
)
def test_the_scope_asked_for_follows_the_spec_order(
    make_hub: HubFactory, variant: VariantServer, browser: Browser, expected: list[str] | None
) -> None:
    hub = make_hub(mcp_servers=[entry(variant)])
    reply, _ = sign_ins(hub, WHOAMI, browser)
    assert reply == "hello from the variant"
    assert variant.seen.authorize_scopes == [expected]


@pytest.mark.parametrize("variant", [Variant(auth_methods=["client_secret_basic"])], indirect=True)
def test_a_basic_only_token_endpoint_with_a_configured_client(
    make_hub: HubFactory, variant: VariantServer, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    body = {
        "client_name": "pre-registered",
        "redirect_uris": [f"http://127.0.0.1:{port}/auth/callback"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    registered = httpx.post(f"{variant.base}/register", json=body).json()
    monkeypatch.setenv("VARIANT_SECRET", registered["client_secret"])
    oauth = {"client_id": registered["client_id"], "client_secret_env": "VARIANT_SECRET"}
    hub = make_hub(port, mcp_servers=[entry(variant, oauth=oauth)])
    reply, asked = sign_ins(hub, WHOAMI, browser)
    assert reply == "hello from the variant" and len(asked) == 1
    assert variant.seen.client_ids == [registered["client_id"]]


@pytest.mark.parametrize("variant", [Variant(needs={"admin_report": "admin"})], indirect=True)
def test_step_up_asks_once_for_the_wider_scope_and_the_call_goes_on(
    make_hub: HubFactory, variant: VariantServer, browser: Browser
) -> None:
    hub = make_hub(mcp_servers=[entry(variant)])
    reply, asked = sign_ins(hub, WHOAMI, browser)  # signed in for the usual scope first
    assert reply == "hello from the variant" and len(asked) == 1
    reply, asked = sign_ins(hub, ADMIN, browser)
    assert reply == "admin report: all good"
    [step_up] = asked
    assert step_up["mode"] == "url" and step_up["context"]["scope"] == "issues admin"
    assert "needs more access" in step_up["message"]
    assert variant.seen.forbidden["admin"] == 1
    assert variant.seen.authorize_scopes == [["issues"], ["issues", "admin"]]
    reply, asked = sign_ins(hub, ADMIN, browser)  # the wider token is kept
    assert reply == "admin report: all good" and asked == []


@pytest.mark.parametrize("variant", [Variant(needs={"admin_report": "admin"}, grants=["issues"])], indirect=True)
def test_a_step_up_that_grants_too_little_ends_the_call_without_asking_again(
    make_hub: HubFactory, variant: VariantServer, browser: Browser
) -> None:
    hub = make_hub(mcp_servers=[entry(variant)])
    reply, asked = sign_ins(hub, ADMIN, browser)
    assert [q["context"].get("scope") for q in asked] == [None, "issues admin"]  # sign-in, then one step-up
    assert reply == (
        "Tool error: Variant needs more access (issues admin) for variant.admin_report than the connected account "
        "allows."
    )
    assert variant.seen.forbidden["admin"] == 2 and variant.seen.tool_calls["admin_report"] == 0


@pytest.mark.parametrize("variant", [Variant(cimd=True, registration=False)], indirect=True)
def test_a_client_id_metadata_document_replaces_registration(
    make_hub: HubFactory, variant: VariantServer, browser: Browser
) -> None:
    hub = make_hub(mcp_servers=[entry(variant)])
    document_url = f"{hub.config.public_url}/oauth/client-metadata.json"
    document = httpx.get(document_url).json()
    assert document["client_id"] == document_url
    assert document["redirect_uris"] == [f"{hub.config.public_url}/auth/callback"]
    assert document["token_endpoint_auth_method"] == "none"
    reply, asked = sign_ins(hub, WHOAMI, browser)
    assert reply == "hello from the variant" and len(asked) == 1
    assert set(variant.seen.client_ids) == {document_url}
    assert variant.seen.documents and set(variant.seen.documents) == {document_url}
    assert variant.provider.clients == {}  # nothing was registered


@pytest.mark.parametrize(
    "variant", [Variant(prm_path=None, challenge_metadata=False, as_metadata=False)], indirect=True
)
def test_a_2025_03_26_server_without_metadata_uses_the_default_endpoints(
    make_hub: HubFactory, variant: VariantServer, browser: Browser
) -> None:
    hub = make_hub(mcp_servers=[entry(variant)])
    server = hub.config.downstream_server("variant")
    assert server is not None
    found = hub.on_loop(hub.hub.oauth.auth_server(server))
    assert (found.authorization_endpoint, found.token_endpoint, found.registration_endpoint) == (
        f"{variant.base}/authorize",
        f"{variant.base}/token",
        f"{variant.base}/register",
    )
    reply, asked = sign_ins(hub, WHOAMI, browser)
    assert reply == "hello from the variant" and len(asked) == 1
    assert len(variant.provider.clients) == 1  # registered at the default /register
