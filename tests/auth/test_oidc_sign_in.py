"""The widget's sign-in with the provider, over HTTP: authorization code with PKCE, state and nonce, then the hub's
own HTTP-only session cookie; a forged or stale return signs no one in."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from elicithub.server.identity import SESSION_COOKIE
from tests.auth.oidc_provider import OidcProvider
from tests.conftest import HubFactory, RunningHub, free_port


@pytest.fixture
def signing_hub(make_hub: HubFactory, oidc: OidcProvider) -> RunningHub:
    """A hub whose widget is a registered client of the provider."""
    port = free_port()
    oidc.provider.register_web_client(f"http://127.0.0.1:{port}/auth/signed-in")
    return make_hub(port=port, auth={"oidc": oidc.config()})


@pytest.fixture
def person() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def sign_in(person: httpx.Client, hub: RunningHub, oidc: OidcProvider, username: str) -> httpx.Response:
    start = person.get(f"{hub.url}/auth/sign-in")
    assert start.status_code == 302
    authorization = parse_qs(urlsplit(start.headers["location"]).query)
    assert authorization["code_challenge_method"] == ["S256"] and authorization["nonce"] and authorization["state"]
    assert authorization["redirect_uri"] == [f"{hub.url}/auth/signed-in"]
    login = person.get(start.headers["location"], follow_redirects=True)
    request_id = parse_qs(urlsplit(str(login.url)).query)["request"][0]
    back = person.post(f"{oidc.base}/login", data={"request": request_id, "username": username})
    return person.get(back.headers["location"])


def test_a_person_signs_in_at_the_provider_and_the_widget_knows_them(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    done = sign_in(person, signing_hub, oidc, "alice")
    assert done.status_code == 302 and done.headers["location"] == "/"
    cookie = done.headers["set-cookie"]
    assert f"{SESSION_COOKIE}=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert person.get(f"{signing_hub.url}/run/api/me").json() == {"user": "alice"}
    assert "Signed in as alice." in person.get(f"{signing_hub.url}/auth/session").text
    out = person.post(f"{signing_hub.url}/auth/sign-out")
    assert out.status_code == 303
    signed_out = {"user": None, "signIn": f"{signing_hub.url}/auth/sign-in"}
    assert person.get(f"{signing_hub.url}/run/api/me").json() == signed_out
    assert "Not signed in" in person.get(f"{signing_hub.url}/auth/session").text


def test_a_return_with_another_state_signs_no_one_in(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    person.get(f"{signing_hub.url}/auth/sign-in")
    forged = person.get(f"{signing_hub.url}/auth/signed-in", params={"code": "x", "state": "not-the-one"})
    assert forged.status_code == 400 and SESSION_COOKIE not in forged.headers.get("set-cookie", "")
    # A return in a browser that never started the sign-in has no pending cookie at all.
    with httpx.Client() as stranger:
        assert stranger.get(f"{signing_hub.url}/auth/signed-in?code=x&state=y").status_code == 400
    refused = person.get(f"{signing_hub.url}/auth/signed-in", params={"error": "access_denied"})
    assert refused.status_code == 400 and "access_denied" in refused.text


def test_an_id_token_for_another_sign_in_is_refused(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    start = person.get(f"{signing_hub.url}/auth/sign-in")
    login = person.get(start.headers["location"], follow_redirects=True)
    oidc.provider.nonces.clear()  # the provider loses the nonce: its ID token carries none
    request_id = parse_qs(urlsplit(str(login.url)).query)["request"][0]
    back = person.post(f"{oidc.base}/login", data={"request": request_id, "username": "alice"})
    done = person.get(back.headers["location"])
    assert done.status_code == 401 and SESSION_COOKIE not in done.headers.get("set-cookie", "")


def test_without_a_client_there_is_no_sign_in(hub: RunningHub) -> None:
    assert httpx.get(f"{hub.url}/auth/sign-in").status_code == 404
