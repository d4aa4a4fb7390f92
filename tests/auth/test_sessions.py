"""The widget's session of a person signed in at the provider: it lasts `auth.oidc.session_s` at most, is refreshed
at the provider once the access token expires, and ends when the provider refuses the refresh."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from elicithub.server.identity import SESSION_COOKIE
from tests.auth.oidc_provider import OidcProvider
from tests.auth.test_oidc_sign_in import sign_in
from tests.conftest import HubFactory, RunningHub, free_port


def provider_hub(make_hub: HubFactory, oidc: OidcProvider, **oidc_config: Any) -> RunningHub:
    port = free_port()
    oidc.provider.register_web_client(f"http://127.0.0.1:{port}/auth/signed-in")
    return make_hub(port=port, auth={"oidc": oidc.config(**oidc_config)})


@pytest.fixture
def signing_hub(make_hub: HubFactory, oidc: OidcProvider) -> RunningHub:
    return provider_hub(make_hub, oidc)


@pytest.fixture
def person() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def me(person: httpx.Client, hub: RunningHub) -> dict[str, Any]:
    response = person.get(f"{hub.url}/run/api/me")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def signed_out(hub: RunningHub) -> dict[str, Any]:
    """What /run/api/me says to a browser signed in as no one, on a hub that signs people in at its provider."""
    return {"user": None, "signIn": f"{hub.url}/auth/sign-in"}


def signed_ago(hub: RunningHub, cookie: str, seconds: int) -> str:
    """The same session cookie, as if the hub had set it `seconds` ago."""

    class Earlier(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - seconds

    key = hub.hub.keys.derive("session")
    value = URLSafeTimedSerializer(key, salt="elicithub-session").loads(cookie)
    return URLSafeTimedSerializer(key, salt="elicithub-session", signer=Earlier).dumps(value)


def test_the_session_cookie_lasts_session_s_and_an_older_one_signs_no_one_in(
    make_hub: HubFactory, oidc: OidcProvider, person: httpx.Client
) -> None:
    hub = provider_hub(make_hub, oidc, session_s=3600)
    done = sign_in(person, hub, oidc, "alice")
    attributes = {a.strip().lower() for a in done.headers["set-cookie"].split(";")}
    assert "max-age=3600" in attributes
    cookie = person.cookies[SESSION_COOKIE]
    with httpx.Client(timeout=30) as nearly:
        nearly.cookies.set(SESSION_COOKIE, signed_ago(hub, cookie, 3600 - 60))
        assert me(nearly, hub) == {"user": "alice"}
    with httpx.Client(timeout=30) as late:
        late.cookies.set(SESSION_COOKIE, signed_ago(hub, cookie, 3600 + 1))
        assert me(late, hub) == signed_out(hub)


def test_without_session_s_a_session_lasts_eight_hours(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    done = sign_in(person, signing_hub, oidc, "alice")
    assert "max-age=28800" in {a.strip().lower() for a in done.headers["set-cookie"].split(";")}


def test_an_expired_access_token_is_refreshed_at_the_provider_with_the_refresh_token(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    oidc.provider.access_ttl_s = 0  # each access token has expired by the next request
    sign_in(person, signing_hub, oidc, "alice")
    assert oidc.provider.seen.refresh_grants == 0
    assert me(person, signing_hub) == {"user": "alice"}
    assert oidc.provider.seen.refresh_grants == 1
    # The provider rotates refresh tokens: the second refresh works only with the one the first one gave.
    assert me(person, signing_hub) == {"user": "alice"}
    assert oidc.provider.seen.refresh_grants == 2
    oidc.provider.access_ttl_s = 300
    assert me(person, signing_hub) == {"user": "alice"}
    assert oidc.provider.seen.refresh_grants == 3
    assert me(person, signing_hub) == {"user": "alice"}  # a fresh access token: nothing to ask the provider
    assert oidc.provider.seen.refresh_grants == 3


def test_requests_at_once_with_an_expired_access_token_make_one_refresh(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    oidc.provider.access_ttl_s = 0
    sign_in(person, signing_hub, oidc, "alice")
    oidc.provider.access_ttl_s = 300
    cookies = {SESSION_COOKIE: person.cookies[SESSION_COOKIE]}
    url = f"{signing_hub.url}/run/api/me"
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: httpx.get(url, cookies=cookies, timeout=30).json(), range(8)))
    assert answers == [{"user": "alice"}] * 8
    assert oidc.provider.seen.refresh_grants == 1


def test_a_refused_refresh_signs_the_person_out(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    oidc.provider.access_ttl_s = 0
    sign_in(person, signing_hub, oidc, "alice")
    oidc.provider.sign_out("alice")  # their session at the provider ends: it refuses their refresh token
    assert me(person, signing_hub) == signed_out(signing_hub)
    assert oidc.provider.seen.refresh_grants == 1
    assert "Not signed in" in person.get(f"{signing_hub.url}/auth/session").text
    assert me(person, signing_hub) == signed_out(signing_hub)
    assert oidc.provider.seen.refresh_grants == 1  # the session is gone: its cookie asks the provider nothing more


def test_a_provider_out_of_reach_leaves_the_session_to_the_next_request(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    oidc.provider.access_ttl_s = 0
    sign_in(person, signing_hub, oidc, "alice")
    oidc.provider.token_down = True
    unavailable = person.get(f"{signing_hub.url}/run/api/me")
    assert unavailable.status_code == 503
    assert unavailable.json()["error"]["code"] == "identity_unavailable"
    assert "Cannot check your sign-in now" in person.get(f"{signing_hub.url}/auth/session").text
    oidc.provider.token_down = False
    assert me(person, signing_hub) == {"user": "alice"}


def test_signing_out_ends_the_session_at_the_hub(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    sign_in(person, signing_hub, oidc, "alice")
    cookie = person.cookies[SESSION_COOKIE]
    assert person.post(f"{signing_hub.url}/auth/sign-out").status_code == 303
    # A copy of the cookie kept from before the sign-out signs no one in either.
    assert httpx.get(f"{signing_hub.url}/run/api/me", cookies={SESSION_COOKIE: cookie}).json() == signed_out(
        signing_hub
    )


def test_the_provider_names_the_person_the_widget_greets(
    signing_hub: RunningHub, oidc: OidcProvider, person: httpx.Client
) -> None:
    oidc.provider.names["alice"] = "Alice Liddell"
    sign_in(person, signing_hub, oidc, "alice")
    assert me(person, signing_hub) == {"user": "alice", "name": "Alice Liddell"}
    assert "Signed in as Alice Liddell." in person.get(f"{signing_hub.url}/auth/session").text
