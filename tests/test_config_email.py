"""`email:`: its defaults, the key as the design spells it (`from`), and errors that name the key path."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from elicithub.config import ConfigError, parse_config

SMTP = {"host": "smtp.acme.com"}


def error_of(email: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as excinfo:
        parse_config({"email": email})
    return str(excinfo.value)


def test_the_designs_example_is_read_with_its_defaults() -> None:
    smtp = {"host": "smtp.acme.com", "port": 587, "tls": "starttls", "username_env": "SMTP_USER"}
    data = {
        "smtp": {**smtp, "password_env": "SMTP_PASSWORD"},
        "from": "ACME agents <agents@acme.com>",
        "users": {"alice": "alice@acme.com"},
    }
    email = parse_config({"email": data}).email
    assert email is not None
    assert email.sender == "ACME agents <agents@acme.com>"
    assert (email.smtp.username_env, email.smtp.password_env) == ("SMTP_USER", "SMTP_PASSWORD")
    assert (email.questions, email.notify_after_s, email.smtp.timeout_s) == (False, 300, 30)
    assert parse_config({}).email is None


@pytest.mark.parametrize(("tls", "port"), [("starttls", 587), ("implicit", 465), ("none", 25)])
def test_the_port_follows_the_tls_mode_unless_given(tls: str, port: int) -> None:
    email = parse_config({"email": {"smtp": {**SMTP, "tls": tls}, "from": "a@acme.com"}}).email
    assert email is not None and email.smtp.port_or_default == port


@pytest.mark.parametrize(
    ("email", "error"),
    [
        ({"from": "a@acme.com"}, "email.smtp: is required"),
        ({"smtp": SMTP}, "email.from: is required"),
        ({"smtp": SMTP, "from": "agents"}, "email.from: 'agents' names no email address"),
        ({"smtp": SMTP, "from": "a@acme.com, b@acme.com"}, "email.from: 'a@acme.com, b@acme.com' names no email"),
        ({"smtp": {**SMTP, "tls": "ssl"}, "from": "a@acme.com"}, "email.smtp.tls: must be one of starttls, implicit"),
        ({"smtp": {**SMTP, "port": 0}, "from": "a@acme.com"}, "email.smtp.port: input should be greater than"),
        ({"smtp": {**SMTP, "username_env": "U"}, "from": "a@acme.com"}, "email.smtp: give both username_env and"),
        ({"smtp": {**SMTP, "username_env": "SMTP USER", "password_env": "P"}, "from": "a@acme.com"}, "username_env"),
        ({"smtp": {**SMTP, "tls": "none", "ca_file": "ca.pem"}, "from": "a@acme.com"}, "email.smtp.ca_file: needs"),
        ({"smtp": {**SMTP, "password": "x"}, "from": "a@acme.com"}, "email.smtp.password: unknown key"),
        ({"smtp": SMTP, "from": "a@acme.com", "users": {"alice": "alice"}}, "email.users.alice: 'alice' is not an"),
        ({"smtp": SMTP, "from": "a@acme.com", "notify_after_s": -1}, "email.notify_after_s: input should be greater"),
    ],
)
def test_a_bad_value_names_its_key_path(email: dict[str, Any], error: str) -> None:
    assert error in error_of(email)


def test_an_address_is_an_approver_the_approval_policies_may_name() -> None:
    approvals = [{"tools": ["deploy.*"], "approvers": {"users": ["erin"]}}]
    servers = [{"id": "deploy", "url": "http://127.0.0.1:9/mcp"}]
    email = {"smtp": SMTP, "from": "a@acme.com", "users": {"erin": "erin@acme.com"}}
    config = parse_config({"mcp_servers": servers, "approvals": approvals, "email": email})
    assert config.approvals[0].approvers != "requester"
    with pytest.raises(ConfigError):
        parse_config({"mcp_servers": servers, "approvals": approvals})


def test_the_email_pages_example_is_a_config_the_hub_accepts() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "email.md").read_text()
    [example] = re.findall(r"^```yaml\n(.*?)^```", page, re.DOTALL | re.MULTILINE)
    email = parse_config(yaml.safe_load(example)).email
    assert email is not None and email.smtp.ca_file == "/etc/ssl/acme-ca.pem"
