"""`elicithub login`: the hub's metadata names the provider, the person signs in in the browser, the loopback
redirect brings the code back, and the token it prints works on the hub."""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from elicithub.clients.login import LoginFailed, login
from tests.auth.oidc_provider import OidcProvider
from tests.conftest import RunningHub, free_port


def a_person_signing_in_as(oidc: OidcProvider, username: str) -> object:
    def person(url: str) -> None:
        with httpx.Client(timeout=10) as browser:
            page = browser.get(url, follow_redirects=True)
            request_id = parse_qs(urlsplit(str(page.url)).query)["request"][0]
            back = browser.post(f"{oidc.base}/login", data={"request": request_id, "username": username})
            browser.get(back.headers["location"])  # the loopback redirect

    return lambda url: threading.Thread(target=person, args=(url,), daemon=True).start() or True


def test_login_gets_a_token_the_hub_takes(oidc_hub: RunningHub, oidc: OidcProvider) -> None:
    port = free_port()
    oidc.provider.register_web_client(f"http://127.0.0.1:{port}/callback", client_id="elicithub-cli")
    said: list[str] = []
    opener = a_person_signing_in_as(oidc, "alice")
    token = asyncio.run(login(oidc_hub.url, "elicithub-cli", said.append, port=port, opener=opener))
    assert oidc.provider.seen.authorize_resources == [oidc_hub.url]  # RFC 8707: a token for this hub
    assert httpx.get(f"{oidc_hub.url}/run/api/me", headers={"authorization": f"Bearer {token}"}).json() == {
        "user": "alice"
    }
    assert said == []  # the link was opened for the person


def test_login_to_a_hub_without_a_provider_says_so(hub: RunningHub) -> None:
    with pytest.raises(LoginFailed, match="names no identity provider"):
        asyncio.run(login(hub.url, "elicithub-cli", print))
