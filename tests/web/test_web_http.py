"""The widget's HTTP side: the page and its files, the session cookie, /run/api/me and conversation restore."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from itsdangerous import URLSafeTimedSerializer

from elicithub.server.identity import SESSION_COOKIE
from tests.auth.oidc_provider import OidcProvider, oidc_provider
from tests.conftest import HubFactory, RunningHub
from tests.server.test_chat_ui_stream import UIStream, text_of, text_part, ui_body
from tests.web.conftest import session_cookie


def me(hub: RunningHub, **kwargs: Any) -> httpx.Response:
    return httpx.get(f"{hub.url}/run/api/me", **kwargs)


def test_the_page_and_its_static_files_are_served(hub: RunningHub) -> None:
    page = httpx.get(f"{hub.url}/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<main id="transcript"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = httpx.get(f"{hub.url}/static/app.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    missing = httpx.get(f"{hub.url}/static/nope.js")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_every_stylesheet_and_script_a_page_links_is_served(hub: RunningHub) -> None:
    for path in ("/", "/inbox", "/admin"):
        page = httpx.get(f"{hub.url}{path}")
        assert page.status_code == 200, path
        linked = re.findall(r'(?:href|src)="(static/[^"]+)"', page.text)
        assert any(url.endswith(".css") for url in linked) and any(url.endswith(".js") for url in linked), path
        for url in linked:
            assert httpx.get(f"{hub.url}/{url}").status_code == 200, (path, url)


def test_demo_signs_the_dev_user_in_with_a_session_cookie(make_hub: HubFactory) -> None:
    hub = make_hub(demo={"enabled": True, "dev_user": "dev"})
    page = httpx.get(f"{hub.url}/")
    header = page.headers["set-cookie"]
    assert header.startswith(f"{SESSION_COOKIE}=")
    assert {"httponly", "samesite=lax", "path=/"} <= {a.strip().lower() for a in header.split(";")}
    cookies = {SESSION_COOKIE: page.cookies[SESSION_COOKIE]}
    assert me(hub, cookies=cookies).json() == {"user": "dev"}
    # A browser that already has a valid session keeps it.
    assert "set-cookie" not in httpx.get(f"{hub.url}/", cookies=cookies).headers


def test_the_demo_signs_the_dev_user_in_on_the_inbox_and_the_admins_page_as_on_the_chat(make_hub: HubFactory) -> None:
    hub = make_hub(demo={"enabled": True})
    for path in ("/inbox", "/admin"):
        page = httpx.get(f"{hub.url}{path}")
        assert page.status_code == 200, path
        cookies = {SESSION_COOKIE: page.cookies[SESSION_COOKIE]}
        assert me(hub, cookies=cookies).json() == {"user": "dev"}, path
        assert "set-cookie" not in httpx.get(f"{hub.url}{path}", cookies=cookies).headers, path
        # A client with a bearer token is not a browser to sign in.
        assert "set-cookie" not in httpx.get(f"{hub.url}{path}", headers={"authorization": "Bearer x"}).headers
        # The demo's dev user is an admin of the hub.
        assert httpx.get(f"{hub.url}/run/api/admin/questions", cookies=cookies).status_code == 200, path


def test_without_demo_the_page_sets_no_cookie_and_nobody_is_signed_in(hub: RunningHub) -> None:
    for path in ("/", "/inbox", "/admin"):
        assert "set-cookie" not in httpx.get(f"{hub.url}{path}").headers, path
    assert me(hub).json() == {"user": None}


@pytest.fixture
def oidc() -> Iterator[OidcProvider]:
    with oidc_provider() as provider:
        yield provider


def test_with_an_identity_provider_no_page_signs_the_dev_user_in(oidc: OidcProvider, make_hub: HubFactory) -> None:
    hub = make_hub(demo={"enabled": True}, auth={"oidc": oidc.config()})
    for path in ("/", "/inbox", "/admin"):
        page = httpx.get(f"{hub.url}{path}")
        assert page.status_code == 200, path
        assert "set-cookie" not in page.headers, path
    assert me(hub).json() == {"user": None, "signIn": f"{hub.url}/auth/sign-in"}


def test_a_forged_or_garbled_cookie_is_anonymous_not_an_error(make_hub: HubFactory) -> None:
    hub = make_hub(demo={"enabled": True})
    forged = URLSafeTimedSerializer(b"another key" * 4, salt="elicithub-session").dumps("alice")
    for value in (forged, "alice", "", "a.b.c"):
        response = me(hub, cookies={SESSION_COOKIE: value})
        assert response.status_code == 200
        assert response.json() == {"user": None}
    # The page replaces a bad session with a good one.
    assert SESSION_COOKIE in httpx.get(f"{hub.url}/", cookies={SESSION_COOKIE: forged}).cookies


def test_a_bearer_token_wins_over_the_cookie_and_a_bad_one_is_still_401(hub: RunningHub) -> None:
    cookies = {SESSION_COOKIE: session_cookie(hub, "alice")}
    assert me(hub, cookies=cookies).json() == {"user": "alice"}
    bob = me(hub, cookies=cookies, headers={"authorization": "Bearer bob-secret-1"})
    assert bob.json() == {"user": "bob"}
    bad = me(hub, cookies=cookies, headers={"authorization": "Bearer wrong-token"})
    assert bad.status_code == 401
    assert bad.json()["error"]["code"] == "unauthorized"


def test_the_cookie_does_not_act_for_a_request_another_origin_sends(hub: RunningHub) -> None:
    cookies = {SESSION_COOKIE: session_cookie(hub, "alice")}
    stream = UIStream(hub.client(), ui_body("conv-origin", text_part('/call mrtr.provision {"name": "orders"}')))
    eid = stream.until("data-elicitation-request")[-1]["id"]
    body = {"conversationId": "conv-origin", "elicitationId": eid, "action": "decline"}
    url = f"{hub.url}/run/api/elicitation-responses"
    for origin in ("http://127.0.0.1:1", "null"):
        elsewhere = httpx.post(url, json=body, cookies=cookies, headers={"origin": origin})
        assert elsewhere.status_code == 404  # anonymous: the question does not exist for them
    # The hub's public URL is its own origin even when a proxy passes on another Host header.
    proxied = {"origin": hub.config.public_url, "host": "hub.internal:8700"}
    assert httpx.post(url, json=body, cookies=cookies, headers=proxied).status_code == 200
    here = httpx.post(url, json=body, cookies=cookies, headers={"origin": hub.url})
    assert here.json() == {"elicitationId": eid, "outcome": "declined"}  # the same answer again: 200
    stream.rest()
    stream.close()


def test_a_conversation_comes_back_with_its_open_question_for_its_owner_only(hub: RunningHub) -> None:
    asked = '/call mrtr.provision {"name": "orders"}'
    stream = UIStream(hub.client(), ui_body("conv-restore", text_part(asked)))
    request = stream.until("data-elicitation-request")[-1]
    url = f"{hub.url}/run/api/conversations/conv-restore"

    with hub.client("alice") as alice:
        restored = alice.get("/run/api/conversations/conv-restore").json()
    assert restored == {
        "id": "conv-restore",
        "messages": [{"role": "user", "text": asked}],
        "pending": [request["data"]],
    }
    # By cookie too: the widget's way in.
    by_cookie = httpx.get(url, cookies={SESSION_COOKIE: session_cookie(hub, "alice")})
    assert by_cookie.json()["pending"] == [request["data"]]

    with hub.client("bob") as bob:
        not_yours = bob.get("/run/api/conversations/conv-restore")
        unknown = bob.get("/run/api/conversations/conv-nope")
    for response in (not_yours, unknown, httpx.get(url)):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"

    assert hub.answer("alice", "conv-restore", request["id"], "accept", {"region": "eu-west-1"}).status_code == 200
    assert text_of(stream.rest()) == "Provisioned orders in eu-west-1."
    stream.close()
    with hub.client("alice") as alice:
        after = alice.get("/run/api/conversations/conv-restore").json()
    assert after["pending"] == []
    assert after["messages"] == [
        {"role": "user", "text": asked},
        {"role": "assistant", "text": "Provisioned orders in eu-west-1."},
    ]


def test_suggestions_are_the_demos_calls_while_the_demo_is_on_and_none_without_it(
    hub: RunningHub, make_hub: HubFactory
) -> None:
    assert httpx.get(f"{hub.url}/run/api/suggestions").json() == {"suggestions": []}
    demo = make_hub(demo={"enabled": True})
    offered = httpx.get(f"{demo.url}/run/api/suggestions").json()["suggestions"]
    messages = [s["message"] for s in offered]
    assert '/call deploy.deploy_service {"service":"orders"}' in messages
    assert "/call tracker.list_issues {}" in messages
    assert all(s["label"] for s in offered)
