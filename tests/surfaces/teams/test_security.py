"""Every activity is checked by the Teams SDK against the Bot Framework's keys (here the stand-in's): a missing,
forged, expired, wrong-audience, wrong-issuer or wrong-service-URL token gets 401 and changes nothing."""

from __future__ import annotations

import httpx
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.surfaces.teams.conftest import ALICE, TeamsHub
from tests.surfaces.teams.standin import MicrosoftStandIn


def test_every_bad_token_is_401_and_nothing_runs_or_is_sent(teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    hub = teams_hub
    activity = hub.message(ALICE, '/call deploy.deploy_service {"service": "orders"}')
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    bad = {
        "missing": "",
        "not a JWT": "not-a-token",
        "signed by another key": microsoft.sign(key=forger),
        "expired": microsoft.sign(expires_in=-600),  # past the SDK's five minutes of clock skew
        "for another bot": microsoft.sign(audience="11111111-2222-4333-8444-555555555555"),
        "from another issuer": microsoft.sign(issuer="https://login.example.com"),
        "for another service URL": microsoft.sign("https://smba.example.com/teams/"),
    }
    for why, token in bad.items():
        response = hub.post(activity, token)
        assert response.status_code == 401, why
    assert httpx.get(f"{hub.url}/healthz").json()["runs"] == 0
    assert [c.path for c in microsoft.calls if "/v3/" in c.path] == []
    # The same activity, signed as the connector signs it, is taken.
    assert hub.post(activity).status_code == 200
    microsoft.wait(lambda: microsoft.in_conversation(activity["conversation"]["id"]))


def test_a_body_that_is_not_an_activity_is_refused(teams_hub: TeamsHub) -> None:
    headers = {"authorization": f"Bearer {teams_hub.microsoft.sign()}", "content-type": "application/json"}
    response = httpx.post(f"{teams_hub.url}/teams/api/messages", content=b"[1, 2]", headers=headers)
    assert response.status_code == 400
    assert httpx.post(f"{teams_hub.url}/teams/api/messages", content=b"{").status_code == 400
