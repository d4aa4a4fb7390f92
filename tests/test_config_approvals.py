"""`groups:`, `approvals:` and `audit:`: which policy a call meets, and config errors that name the key path."""

from __future__ import annotations

from typing import Any

import pytest

from elicithub.config import ConfigError, parse_config
from elicithub.config.approvals import AUDIT_RETENTION_S, first_policy

SERVERS = [{"id": "deploy", "url": "http://127.0.0.1:9/mcp"}, {"id": "release", "url": "http://127.0.0.1:9/mcp"}]
USERS = [{"id": "alice", "token": "alice-secret"}]


def config(**extra: Any) -> dict[str, Any]:
    return {"mcp_servers": SERVERS, "users": USERS, "groups": {"ops": ["carol"]}, **extra}


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as excinfo:
        parse_config(data)
    return str(excinfo.value)


def test_the_first_policy_in_the_file_whose_globs_match_decides() -> None:
    policies = [
        {"tools": ["release.rollback"], "approvers": {"users": ["alice"]}},
        {"tools": ["deploy.deploy_*", "release.*"], "approvers": {"groups": ["ops"]}, "timeout_s": 60},
    ]
    parsed = parse_config(config(approvals=policies)).approvals
    assert first_policy(parsed, "release.rollback") is parsed[0]
    assert first_policy(parsed, "release.promote") is parsed[1]
    assert first_policy(parsed, "deploy.deploy_service") is parsed[1]
    assert first_policy(parsed, "deploy.migrate") is None
    assert first_policy(parsed, "deployx.deploy_service") is None


def test_defaults_are_the_requesters_approval_and_ninety_days_of_audit() -> None:
    parsed = parse_config(config(approvals=[{"tools": ["deploy.*"]}]))
    [policy] = parsed.approvals
    assert policy.approvers == "requester" and policy.on_timeout == "deny" and not policy.allow_edit
    assert policy.timeout_s is None and not policy.self_approval
    assert parsed.audit.retention_s == AUDIT_RETENTION_S == 90 * 24 * 3600


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"tools": ["deploy.*"], "approvers": {"groups": ["opz"]}}, "approvals[0].approvers.groups[0]: no group opz"),
        ({"tools": ["deploy.*"], "approvers": {"users": ["mallory"]}}, "approvals[0].approvers.users[0]: no user"),
        (
            {
                "tools": ["deploy.*"],
                "approvers": {"groups": ["ops"]},
                "escalate_after_s": 5,
                "escalate_to": {"users": ["x"]},
            },
            "approvals[0].escalate_to.users[0]: no user x",
        ),
        ({"tools": ["deplyo.*"]}, "approvals[0].tools[0]: no server or agent deplyo"),
        ({"tools": ["deploy"]}, "approvals[0].tools[0]: deploy is not SERVER.TOOL"),
        ({"tools": []}, "approvals[0].tools: "),
        ({"tools": ["deploy.*"], "on_timeout": "maybe"}, "approvals[0].on_timeout: must be one of deny, approve"),
        ({"tools": ["deploy.*"], "approvers": {}}, "approvals[0].approvers"),
        ({"tools": ["deploy.*"], "approvers": "anyone"}, "approvals[0].approvers"),
        ({"tools": ["deploy.*"], "wait_s": 5}, "approvals[0].wait_s: unknown key"),
        ({"tools": ["deploy.*"], "timeout_s": 0}, "approvals[0].timeout_s: "),
        (
            {"tools": ["deploy.*"], "approvers": {"groups": ["ops"]}, "escalate_after_s": 5},
            "give both escalate_after_s and escalate_to",
        ),
        ({"tools": ["deploy.*"], "timeout_s": 60, "remind_after_s": 60}, "approvals[0].remind_after_s: must be less"),
        ({"tools": ["deploy.*"], "escalate_after_s": 5, "escalate_to": {"users": ["carol"]}}, "escalate_to: needs"),
    ],
)
def test_a_bad_policy_is_an_error_naming_its_key_path(policy: dict[str, Any], expected: str) -> None:
    assert expected in error_of(config(approvals=[policy]))


def test_a_group_name_and_its_members_are_checked() -> None:
    assert "groups.ops[0]: " in error_of(config(groups={"ops": [""]}))
    assert "groups.o p: not a group name" in error_of(config(groups={"o p": ["carol"]}))


def test_users_are_known_from_users_groups_admins_slack_teams_and_the_demo() -> None:
    for extra in (
        {"users": [*USERS, {"id": "mallory", "token": "mallory-secret"}]},
        {"groups": {"ops": ["carol"], "audit": ["mallory"]}},
        {"admins": ["mallory"]},
        {"slack": {"users": {"U012ABC": "mallory"}}},
        {
            "teams": {
                "tenant_id": "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f",
                "users": {"0a1b2c3d-0000-4000-8000-0000000000aa": "mallory"},
            }
        },
    ):
        policies = [{"tools": ["deploy.*"], "approvers": {"users": ["mallory"]}}]
        assert parse_config({**config(approvals=policies), **extra}).approvals
    demo = {"tools": ["deploy.*"], "approvers": {"users": ["dev"]}}
    assert parse_config({**config(approvals=[demo]), "demo": {"enabled": True}}).approvals


def test_with_oidc_groups_and_users_the_config_does_not_know_are_the_providers() -> None:
    oidc = {"oidc": {"issuer": "https://login.example.test", "audience": "elicithub"}}
    policies = [{"tools": ["deploy.*"], "approvers": {"groups": ["sre"], "users": ["someone"]}}]
    assert parse_config({**config(approvals=policies), "auth": oidc}).approvals


def test_audit_retention_must_be_positive() -> None:
    assert "audit.retention_s: " in error_of(config(audit={"retention_s": 0}))
    assert "audit.keep: unknown key" in error_of(config(audit={"keep": 1}))
