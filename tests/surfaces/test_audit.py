"""`GET /run/api/audit`: every approval's record, for admins only, newest first, filtered and paged."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import httpx
import pytest

from tests.conftest import HubFactory, RunningHub
from tests.triggers.approving import GROUPS, RESTART, USERS, OpsServer, Requester, answer, person, policy

AUDIT = "/run/api/audit"


@pytest.fixture
def audited(make_hub: HubFactory) -> Iterator[RunningHub]:
    """A hub whose admin is dave, after two approvals of alice's calls: bob approved one with an edit, carol denied
    the next."""
    ops = OpsServer()
    with ops.served() as app:
        hub = make_hub(
            users=USERS,
            groups=GROUPS,
            admins=["dave"],
            mcp_servers=[{"id": "ops", "url": f"{app.url}/mcp"}],
            approvals=[policy()],
        )
        for conversation, approver, content in [
            ("conv-audit-1", "bob", {"approve": True, "replicas": 4, "reason": "load"}),
            ("conv-audit-2", "carol", {"approve": False, "reason": "freeze"}),
        ]:
            with Requester(hub.url, "alice", conversation, RESTART) as alice:
                pending = alice.until("data-approval-pending")
                assert answer(hub.url, approver, pending["id"], content=content).status_code == 200
                alice.rest()
        yield hub


def listed(hub: RunningHub, **params: str | int) -> httpx.Response:
    with person(hub.url, "dave") as dave:
        return dave.get(AUDIT, params=params)


def test_an_admin_reads_each_approvals_record_newest_first(audited: RunningHub) -> None:
    response = listed(audited)
    assert response.status_code == 200, response.text
    denied, approved = response.json()["records"]
    assert response.json()["nextCursor"] is None
    assert approved["tool"] == "ops.restart" and approved["requester"] == "alice"
    assert approved["approvers"] == {"users": [], "groups": ["ops"]}
    assert approved["answeredBy"] == "bob" and approved["outcome"] == "approved" and approved["reason"] == "load"
    assert approved["channel"] == "chat"  # answered through the hub's HTTP API
    assert approved["arguments"] == {"service": "orders", "replicas": 4}  # as called, after the edit
    assert approved["elicitationId"].startswith("eli_") and approved["runId"].startswith("run_")
    assert datetime.fromisoformat(approved["at"]) <= datetime.fromisoformat(denied["at"])
    assert denied["answeredBy"] == "carol" and denied["outcome"] == "denied"
    assert denied["reason"] == "freeze" and denied["arguments"]["replicas"] == 2  # carol's words alone


def test_filters_and_pages(audited: RunningHub) -> None:
    def outcomes(**params: str | int) -> list[str]:
        response = listed(audited, **params)
        assert response.status_code == 200, response.text
        return [r["outcome"] for r in response.json()["records"]]

    assert outcomes(tool="ops.*") == ["denied", "approved"]
    assert outcomes(tool="ops.restart") == ["denied", "approved"]
    assert outcomes(tool="deploy.*") == []
    assert outcomes(user="bob") == ["approved"]
    assert outcomes(user="alice") == ["denied", "approved"]
    assert outcomes(since="2000-01-01T00:00:00Z") == ["denied", "approved"]
    assert outcomes(since="2999-01-01") == []
    first = listed(audited, limit=1).json()
    assert [r["outcome"] for r in first["records"]] == ["denied"] and first["nextCursor"]
    assert outcomes(limit=1, cursor=first["nextCursor"]) == ["approved"]


@pytest.mark.parametrize(
    ("params", "named"), [({"since": "yesterday"}, "since"), ({"limit": 0}, "limit"), ({"cursor": "x!"}, "cursor")]
)
def test_a_bad_parameter_is_refused_naming_it(audited: RunningHub, params: dict[str, str | int], named: str) -> None:
    response = listed(audited, **params)
    assert response.status_code in (400, 422) and named in response.json()["error"]["message"]


def test_only_admins_read_it(audited: RunningHub) -> None:
    with person(audited.url, "alice") as alice:
        refused = alice.get(AUDIT)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert httpx.get(audited.url + AUDIT).status_code == 401
