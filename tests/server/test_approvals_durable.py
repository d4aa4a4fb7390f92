"""An approval given before a hub is killed outright stays given: the call, run again after the restart, is not
approved a second time (though the run's pause now names a later question of the tool's own)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.conftest import eventually
from tests.server.test_scale_out import ServedHub
from tests.triggers.approving import GROUPS, PEOPLE, USERS, OpsServer, Requester, answer, person, policy

ROLLBACK = '/call ops.rollback {"service": "orders"}'


def test_an_approval_given_before_a_kill_9_is_not_asked_again_when_the_call_runs_again(tmp_path: Path) -> None:
    ops = OpsServer()
    with ops.served() as app:
        config = tmp_path / "hub.yaml"
        config.write_text(
            json.dumps(
                {
                    "store": {"url": f"sqlite:///{tmp_path / 'hub.db'}"},
                    "secrets": {"key_file": str(tmp_path / "secret.key")},
                    "users": USERS,
                    "groups": GROUPS,
                    "admins": ["dave"],
                    "mcp_servers": [{"id": "ops", "url": f"{app.url}/mcp", "protocol": "legacy"}],
                    "approvals": [policy()],
                }
            )
        )
        first = ServedHub(config, tmp_path / "first.log")
        first.wait()
        try:
            with Requester(first.url, "alice", "conv-given", ROLLBACK) as alice:
                pending = alice.until("data-approval-pending")
                assert answer(first.url, "bob", pending["id"], content={"approve": True}).status_code == 200
                asked = alice.until("data-elicitation-request")["data"]  # the tool's own question, to alice
                assert asked["message"] == "Roll orders back?"
        finally:
            first.process.kill()
            first.process.wait()
        second = ServedHub(config, tmp_path / "second.log")  # the same hub, restarted (its old port may be taken)
        second.wait()
        try:
            with person(second.url, "alice") as client:
                eventually(
                    lambda: (
                        [q["elicitationId"] for q in client.get("/run/api/conversations/conv-given").json()["pending"]]
                        == [asked["elicitationId"]]
                    ),
                    "the tool's question is not open again",
                )
            assert answer(second.url, "alice", asked["elicitationId"], content={"confirm": True}).status_code == 200
            with httpx.Client(base_url=second.url, headers={"authorization": f"Bearer {PEOPLE['dave']}"}) as dave:
                eventually(lambda: dave.get("/run/api/audit").json()["records"] != [], "no audit record")
                [record] = dave.get("/run/api/audit").json()["records"]
            assert record["outcome"] == "approved" and record["answeredBy"] == "bob"
            with person(second.url, "alice") as client:
                eventually(
                    lambda: (
                        client.get("/run/api/conversations/conv-given").json()["messages"][-1]["text"]
                        == "Rolled orders back."
                    ),
                    "the run did not finish",
                )
        finally:
            second.stop()
    logs = [(tmp_path / name).read_text() for name in ("first.log", "second.log")]
    assert sum(log.count("asked of group ops") for log in logs) == 1  # one approval, never asked again
