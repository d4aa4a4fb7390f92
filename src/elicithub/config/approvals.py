"""The config of questions other people answer: `groups:`, `approvals:` (policies) and `audit:`."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from fnmatch import fnmatchcase
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from elicithub.core.approval import OnTimeout, People

Name = Annotated[str, Field(min_length=1)]
GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]*$")
AUDIT_RETENTION_S = 90 * 24 * 3600


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PeopleConfig(_Strict):
    """Some users and groups; at least one of them."""

    users: list[Name] = []
    groups: list[Name] = []

    @model_validator(mode="after")
    def _someone(self) -> PeopleConfig:
        if not self.users and not self.groups:
            raise ValueError("name at least one of users or groups")
        return self

    def people(self) -> People:
        return People(tuple(self.users), tuple(self.groups))


class ApprovalPolicy(_Strict):
    """Before a tool matching one of `tools` (globs on SERVER.TOOL) is called, `approvers` approve the call."""

    tools: list[Name] = Field(min_length=1)
    approvers: Literal["requester"] | PeopleConfig = "requester"
    timeout_s: float | None = Field(default=None, gt=0)  # default: elicitation.timeout_s
    on_timeout: OnTimeout = "deny"
    remind_after_s: float | None = Field(default=None, gt=0)
    escalate_after_s: float | None = Field(default=None, gt=0)
    escalate_to: PeopleConfig | None = None
    allow_edit: bool = False
    self_approval: bool = False  # the requester approves for themselves when `approvers` is "requester"

    @model_validator(mode="after")
    def _escalation(self) -> ApprovalPolicy:
        if (self.escalate_after_s is None) != (self.escalate_to is None):
            raise ValueError("give both escalate_after_s and escalate_to, or neither")
        if self.approvers == "requester" and self.escalate_to is not None:
            raise ValueError("escalate_to: needs approvers other than the requester")
        return self

    def matches(self, tool: str) -> bool:
        return any(fnmatchcase(tool, pattern) for pattern in self.tools)


class AuditConfig(_Strict):
    """How long each approval's record is kept in the audit log."""

    retention_s: float = Field(default=AUDIT_RETENTION_S, gt=0)


def first_policy(policies: list[ApprovalPolicy], tool: str) -> ApprovalPolicy | None:
    """The policy for a call of `tool` (SERVER.TOOL): the first in the file that matches it."""
    return next((p for p in policies if p.matches(tool)), None)


def check_approvals(
    policies: list[ApprovalPolicy],
    groups: Mapping[str, list[str]],
    known_users: Collection[str],
    prefixes: Collection[str] | None,
    timeout_s: float,
    oidc: bool,
) -> None:
    """Every group and user a policy names exists, every server a tool glob names too, and its timers fall within
    its timeout. With OIDC the provider knows of groups and users the config does not, so none is unknown then.
    `prefixes`: the servers, A2A agents and agents whose tools may be called (None: not all known)."""
    for name in groups:
        if not GROUP.match(name):
            raise ValueError(f"groups.{name}: not a group name (letters, digits and _ . : @ / -)")
    for index, policy in enumerate(policies):
        at = f"approvals[{index}]"
        for key, people in (("approvers", policy.approvers), ("escalate_to", policy.escalate_to)):
            if not isinstance(people, PeopleConfig) or oidc:
                continue
            for n, group in enumerate(people.groups):
                if group not in groups:
                    raise ValueError(f"{at}.{key}.groups[{n}]: no group {group} (see groups:)")
            for n, user in enumerate(people.users):
                if user not in known_users:
                    raise ValueError(
                        f"{at}.{key}.users[{n}]: no user {user} (not in users:, groups:, admins:, slack: or teams:)"
                    )
        for n, pattern in enumerate(policy.tools):
            server, dot, _ = pattern.partition(".")
            if not dot and not any(c in pattern for c in "*?["):
                raise ValueError(f"{at}.tools[{n}]: {pattern} is not SERVER.TOOL")
            if prefixes is not None and not any(c in server for c in "*?[") and server not in prefixes:
                raise ValueError(f"{at}.tools[{n}]: no server or agent {server}")
        timeout = policy.timeout_s or timeout_s
        for key, after in (("remind_after_s", policy.remind_after_s), ("escalate_after_s", policy.escalate_after_s)):
            if after is not None and after >= timeout:
                raise ValueError(f"{at}.{key}: must be less than its timeout_s ({timeout:g})")
