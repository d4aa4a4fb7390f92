"""Who is an admin: the users `admins:` names, and with OIDC the members of `auth.oidc.admin_group`, by a bearer
JWT's groups claim or by the ID token of the person's widget sign-in."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.auth.oidc_provider import OidcProvider, oidc_provider
from tests.auth.test_oidc_sign_in import sign_in
from tests.conftest import HubFactory, RunningHub, free_port

QUESTIONS = "/run/api/admin/questions"
ADMIN_GROUP = "hub-admins"


@pytest.fixture
def oidc() -> Iterator[OidcProvider]:
    with oidc_provider() as provider:
        yield provider


@pytest.fixture
def group_hub(make_hub: HubFactory, oidc: OidcProvider) -> RunningHub:
    """A hub whose admins are the provider's members of ADMIN_GROUP, its widget a registered client there."""
    port = free_port()
    oidc.provider.register_web_client(f"http://127.0.0.1:{port}/auth/signed-in")
    return make_hub(port=port, auth={"oidc": oidc.config(admin_group=ADMIN_GROUP)})


def listing(hub: RunningHub, token: str) -> int:
    """The status of the admin's list for a bearer token."""
    return httpx.get(f"{hub.url}{QUESTIONS}", headers={"authorization": f"Bearer {token}"}, timeout=30).status_code


def test_a_jwt_whose_groups_claim_has_the_admin_group_is_an_admins(group_hub: RunningHub, oidc: OidcProvider) -> None:
    mint = oidc.provider.mint
    assert listing(group_hub, mint("dave", groups=["staff", ADMIN_GROUP])) == 200
    assert listing(group_hub, mint("dave", groups=ADMIN_GROUP)) == 200  # a lone group, as some providers give it
    assert listing(group_hub, mint("erin", groups=["staff", f"/{ADMIN_GROUP}"])) == 403  # names compare exactly
    assert listing(group_hub, mint("erin")) == 403
    assert listing(group_hub, "alice-secret") == 403  # a static user is in no group
    # A token the hub does not take is nobody's, whatever it claims.
    assert listing(group_hub, mint("dave", groups=[ADMIN_GROUP], aud="another-api")) == 401


def test_the_groups_claim_is_the_one_configured(make_hub: HubFactory, oidc: OidcProvider) -> None:
    hub = make_hub(auth={"oidc": oidc.config(admin_group=ADMIN_GROUP, groups_claim="roles")})
    assert listing(hub, oidc.provider.mint("dave", roles=[ADMIN_GROUP])) == 200
    assert listing(hub, oidc.provider.mint("dave", groups=[ADMIN_GROUP])) == 403


def test_admins_named_in_the_config_are_admins_however_they_sign_in(make_hub: HubFactory, oidc: OidcProvider) -> None:
    hub = make_hub(admins=["alice"], auth={"oidc": oidc.config()})
    assert listing(hub, "alice-secret") == 200
    assert listing(hub, oidc.provider.mint("alice")) == 200
    assert listing(hub, "bob-secret-1") == 403
    assert listing(hub, oidc.provider.mint("bob", groups=[ADMIN_GROUP])) == 403  # no admin_group configured


def test_a_widget_sign_in_whose_id_token_has_the_admin_group_is_an_admins_session(
    group_hub: RunningHub, oidc: OidcProvider
) -> None:
    oidc.provider.groups["dave"] = [ADMIN_GROUP]
    questions = f"{group_hub.url}{QUESTIONS}"
    with httpx.Client(timeout=30) as dave, httpx.Client(timeout=30) as erin:
        assert sign_in(dave, group_hub, oidc, "dave").status_code == 302
        assert sign_in(erin, group_hub, oidc, "erin").status_code == 302
        assert dave.get(questions).json() == {"questions": []}
        assert erin.get(questions).status_code == 403
        cancel = f"{questions}/eli_unknown/cancel"
        assert dave.post(cancel).status_code == 404
        # A write another site sends with the session cookie is no one's.
        assert dave.post(cancel, headers={"origin": "http://elsewhere.example"}).status_code == 401

        # Taken out of the group, dave is no admin from his next sign-in on, in any browser.
        oidc.provider.groups["dave"] = []
        with httpx.Client(timeout=30) as again:
            assert sign_in(again, group_hub, oidc, "dave").status_code == 302
            assert again.get(questions).status_code == 403
        assert dave.get(questions).status_code == 403
