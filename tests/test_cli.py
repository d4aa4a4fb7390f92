"""The `elicithub` command line: `config check`, `store migrate`, `store copy`, `key init` and the top-level help."""

from __future__ import annotations

import base64
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elicithub.cli import app
from elicithub.store.postgres.schema import LATEST
from elicithub.store.sqlite.schema import SCHEMA
from tests.conftest import free_port
from tests.core_fixtures import PostgresServer, RedisServer

GOOD = """\
public_url: http://127.0.0.1:8700
store: {url: "memory://"}
model: {kind: openai, base_url: "http://127.0.0.1:11434/v1", model: llama3}
users:
  - {id: alice, token: alice-secret}
elicitation: {timeout_s: 120}
mcp_servers:
  - id: deploy
    url: http://127.0.0.1:9100/mcp
  - id: tracker
    url: http://127.0.0.1:9200/mcp
    credential_scope: user
  - id: files
    command: [python, server.py]
    credential_scope: project
    credential_env: FILES_TOKEN
a2a_agents:
  - id: travel
    url: http://127.0.0.1:9300
"""
BAD = """\
mcp_servers:
  - id: deploy
    url: http://127.0.0.1:9100/mcp
    credential_scope: team
"""
BAD_MESSAGE = "mcp_servers[0].credential_scope: must be one of none, project, user"

runner = CliRunner()


def write(tmp_path: Path, text: str, name: str = "hub.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_config_check_on_a_good_file_prints_what_it_found(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path}: ok"
    assert "  store       memory://" in lines
    assert "  model       openai (llama3)" in lines
    assert "  users       alice" in lines
    assert "  elicitation timeout 120 s, at most 10 rounds" in lines
    assert "  mcp server  deploy: http://127.0.0.1:9100/mcp (credentials: none, protocol: auto)" in lines
    assert "  mcp server  tracker: http://127.0.0.1:9200/mcp (credentials: user, protocol: auto)" in lines
    tracker = lines.index("  mcp server  tracker: http://127.0.0.1:9200/mcp (credentials: user, protocol: auto)")
    assert "tracker has no tools: list" in lines[tracker + 1]  # its tools wait for a token
    assert not any("deploy has no tools" in line or "files has no tools" in line for line in lines)
    assert "  mcp server  files: python server.py (credentials: project, protocol: auto)" in lines
    assert "  a2a agent   travel: http://127.0.0.1:9300 (credentials: none)" in lines
    assert result.stderr == ""


def test_config_check_shows_the_slack_app(tmp_path: Path) -> None:
    path = write(tmp_path, "slack: {users: {U012ABC: alice}, bot_token_env: BOT}\n")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert (
        "  slack       POST /slack/events, agent assistant, mapped Slack users: 1, "
        "secrets from $BOT and $SLACK_SIGNING_SECRET"
    ) in result.stdout.splitlines()


def test_config_check_shows_the_teams_bot(tmp_path: Path) -> None:
    users = "{0a1b2c3d-0000-4000-8000-0000000000aa: alice}"
    path = write(tmp_path, f"teams: {{tenant_id: 6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f, users: {users}}}\n")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert (
        "  teams       POST /teams/api/messages, agent assistant, mapped Teams users: 1, "
        "secrets from $TEAMS_APP_ID and $TEAMS_APP_PASSWORD"
    ) in result.stdout.splitlines()


def test_config_check_shows_the_mail_server(tmp_path: Path) -> None:
    smtp = "{host: smtp.acme.com, username_env: SMTP_USER, password_env: SMTP_PASSWORD}"
    email = f"{{smtp: {smtp}, from: 'ACME <agents@acme.com>', users: {{alice: a@acme.com}}, questions: true}}"
    path = write(tmp_path, f"email: {email}\n")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert (
        "  email       from ACME <agents@acme.com> through smtp.acme.com:587 (starttls, login from $SMTP_USER and "
        "$SMTP_PASSWORD), addresses: 1, own questions after 300 s"
    ) in result.stdout.splitlines()


def test_config_check_shows_the_identity_provider(tmp_path: Path) -> None:
    oidc = "{issuer: https://login.example.com/realms/acme, audience: elicithub}"
    path = write(tmp_path, f"auth: {{oidc: {oidc}, anonymous: false}}\n")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "  identity    JWTs from https://login.example.com/realms/acme for audience elicithub, user = sub" in lines
    assert "  anonymous   off: chat needs a user" in lines


def test_config_check_shows_the_admins(tmp_path: Path) -> None:
    oidc = "{issuer: https://login.example.com/realms/acme, audience: elicithub, admin_group: ops}"
    path = write(tmp_path, f"admins: [alice, carol]\nauth: {{oidc: {oidc}}}\n")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "  admins      alice, carol, members of ops (claim groups)" in result.stdout.splitlines()
    defaults = runner.invoke(app, ["config", "check", str(write(tmp_path, ""))]).stdout.splitlines()
    assert not any(line.startswith("  admins") for line in defaults)


def test_config_check_shows_the_approval_policies(tmp_path: Path) -> None:
    servers = 'mcp_servers: [{id: deploy, url: "http://127.0.0.1:9/mcp"}]\n'
    policies = (
        "groups: {ops: [carol]}\napprovals:\n"
        "  - {tools: [deploy.*], approvers: {groups: [ops], users: [carol]}, timeout_s: 60, on_timeout: approve}\n"
        "  - {tools: [deploy.migrate]}\n"
    )
    result = runner.invoke(app, ["config", "check", str(write(tmp_path, servers + policies))])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "  approval    deploy.* by carol, group ops (timeout 60 s, on_timeout approve)" in lines
    assert "  approval    deploy.migrate by the requester (timeout 600 s, on_timeout deny)" in lines


def test_config_check_on_an_empty_file_shows_the_defaults(tmp_path: Path) -> None:
    result = runner.invoke(app, ["config", "check", str(write(tmp_path, ""))])
    assert result.exit_code == 0, result.output
    assert "  public_url  http://127.0.0.1:8700" in result.stdout
    assert "  store       sqlite:///.elicithub/hub.db" in result.stdout
    assert "  model       scripted" in result.stdout.splitlines()
    assert "  users       (none)" in result.stdout
    assert "mcp server" not in result.stdout


def test_config_check_on_a_bad_file_exits_2_naming_the_key_path(tmp_path: Path) -> None:
    result = runner.invoke(app, ["config", "check", str(write(tmp_path, BAD))])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {BAD_MESSAGE}"
    assert "ok" not in result.stdout


def test_config_check_on_invalid_yaml_and_missing_file_exits_2(tmp_path: Path) -> None:
    broken = runner.invoke(app, ["config", "check", str(write(tmp_path, "a: [\n"))])
    assert broken.exit_code == 2
    assert broken.stderr.startswith("error: ") and "not valid YAML" in broken.stderr
    missing = runner.invoke(app, ["config", "check", str(tmp_path / "absent.yaml")])
    assert missing.exit_code == 2
    assert missing.stderr.startswith("error: cannot read ")


def test_config_check_without_a_file_is_a_usage_error() -> None:
    result = runner.invoke(app, ["config", "check"])
    assert result.exit_code == 2
    assert "Missing argument" in result.output


def test_help_lists_serve_and_config() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "serve" in result.stdout
    assert "config" in result.stdout
    config_help = runner.invoke(app, ["config", "--help"])
    assert config_help.exit_code == 0
    assert "check" in config_help.stdout


def test_serve_help_lists_its_options() -> None:
    result = runner.invoke(app, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--config", "--host", "--port"):
        assert option in result.stdout


def test_serve_with_a_bad_config_exits_2_before_listening(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "--config", str(write(tmp_path, BAD))])
    assert result.exit_code == 2
    assert BAD_MESSAGE in result.stderr
    assert "listening" not in result.stdout


def _console_script() -> list[str]:
    # The installed `elicithub` entry point of this venv (`python -m elicithub.cli` runs nothing: no __main__ guard).
    script = Path(sys.executable).parent / "elicithub"
    assert script.exists(), f"no console script at {script}; run `uv sync`"
    return [str(script)]


def test_installed_command_checks_good_and_bad_files(tmp_path: Path) -> None:
    good = subprocess.run(
        [*_console_script(), "config", "check", str(write(tmp_path, GOOD))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert "mcp server  deploy: http://127.0.0.1:9100/mcp" in good.stdout
    assert "mcp server  files: python server.py" in good.stdout

    bad = subprocess.run(
        [*_console_script(), "config", "check", str(write(tmp_path, BAD, "bad.yaml"))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == f"error: {BAD_MESSAGE}"
    assert bad.stdout == ""


def test_store_migrate_applies_the_pending_steps_once(tmp_path: Path, postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh("cli_migrate").replace("postgres@", "postgres:pw@")  # trust auth ignores it
    config = write(tmp_path, f'store: {{url: "{url}"}}\n')
    first = runner.invoke(app, ["store", "migrate", "--config", str(config)])
    assert first.exit_code == 0, first.output
    shown = url.replace(":pw@", ":***@")
    steps = ", ".join(str(n) for n in range(1, LATEST + 1))
    assert first.stdout == f"{shown}: applied steps {steps}; the schema is at version {LATEST}\n"
    again = runner.invoke(app, ["store", "migrate", "--config", str(config)])
    assert again.stdout == f"{shown}: nothing to apply; the schema is at version {LATEST}\n"


def test_store_migrate_on_a_store_without_steps_says_there_is_nothing_to_do(tmp_path: Path) -> None:
    result = runner.invoke(app, ["store", "migrate", "--config", str(write(tmp_path, GOOD))])
    assert result.exit_code == 0
    assert result.stdout == "memory://: this store has no schema steps; nothing to do\n"


def test_store_copy_copies_into_an_empty_store_and_sums_up(tmp_path: Path, postgres_server: PostgresServer) -> None:
    source = f"sqlite:///{tmp_path / 'hub.db'}"
    with sqlite3.connect(tmp_path / "hub.db") as db:
        db.executescript(SCHEMA)
        db.execute("INSERT INTO vault VALUES ('credential:tracker:alice', x'00ff', NULL)")
    target = postgres_server.fresh("cli_copy").replace("postgres@", "postgres:pw@")  # trust auth ignores it
    result = runner.invoke(app, ["store", "copy", "--from", source, "--to", target])
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"copied 1 records from {source} to {target.replace(':pw@', ':***@')}: 0 questions, 0 runs, "
        "0 conversations, 0 event logs, 1 key-value entries, 0 lists\n"
    )
    assert "copying records" in result.stderr and "1/1" in result.stderr  # the progress bar
    again = runner.invoke(app, ["store", "copy", "--from", source, "--to", target])
    assert again.exit_code == 2 and again.stdout == ""
    assert again.stderr == (
        f"error: the store {target.replace(':pw@', ':***@')} is not empty (1 rows in elicithub_kv): "
        "copy only into an empty store\n"
    )


@pytest.mark.parametrize(
    ("source", "target", "error"),
    [
        ("memory://", "sqlite:///{tmp}/b.db", "memory:// keeps nothing outside its hub's process"),
        ("sqlite:///{tmp}/a.db", "mysql://db/hub", "unsupported store url 'mysql://db/hub'; use sqlite:///PATH"),
        ("sqlite:///{tmp}/absent.db", "sqlite:///{tmp}/b.db", "there is no SQLite store at {tmp}/absent.db"),
        ("redis://127.0.0.1:{closed}/0", "sqlite:///{tmp}/b.db", "cannot connect to the Redis store"),
        ("postgresql://u@127.0.0.1:{closed}/hub", "sqlite:///{tmp}/b.db", "cannot connect to the Postgres store"),
        ("sqlite:///{tmp}/a.db", "redis://127.0.0.1:{closed}/0", "cannot connect to the Redis store"),
    ],
)
def test_store_copy_with_a_store_it_cannot_use_exits_2_saying_why(
    source: str, target: str, error: str, tmp_path: Path
) -> None:
    with sqlite3.connect(tmp_path / "a.db") as db:
        db.executescript(SCHEMA)
    where = {"tmp": str(tmp_path), "closed": str(free_port())}
    arguments = ["store", "copy", "--from", source.format(**where), "--to", target.format(**where)]
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: {error.format(**where)}"), result.stderr
    assert not (tmp_path / "b.db").exists()


def test_serve_refuses_a_postgres_schema_newer_than_it_knows(tmp_path: Path, postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh("cli_newer")
    newer = f"CREATE TABLE elicithub_migrations (version int); INSERT INTO elicithub_migrations VALUES ({LATEST + 1})"
    postgres_server.psql("cli_newer", newer)
    result = runner.invoke(app, ["serve", "--config", str(write(tmp_path, f'store: {{url: "{url}"}}\n'))])
    assert result.exit_code == 2
    assert f"schema is at version {LATEST + 1}, newer than this hub knows ({LATEST})" in result.stderr
    assert "listening" not in result.stdout


def test_serve_refuses_a_redis_that_may_evict_keys(tmp_path: Path, redis_server: RedisServer, redis_url: str) -> None:
    config = write(tmp_path, f'store: {{url: "{redis_url}"}}\n')
    with redis_server.client() as client:
        client.config_set("maxmemory-policy", "allkeys-lru")
        try:
            result = runner.invoke(app, ["serve", "--config", str(config)])
        finally:
            client.config_set("maxmemory-policy", "noeviction")
    assert result.exit_code == 2
    assert "maxmemory-policy is allkeys-lru" in result.stderr and "store.allow_eviction: true" in result.stderr
    assert "listening" not in result.stdout


def test_key_init_makes_the_key_file_the_config_names_once_and_then_checks_it(tmp_path: Path) -> None:
    key_file = tmp_path / "key" / "secret.key"
    config = write(tmp_path, f'store: {{url: "memory://"}}\nsecrets: {{key_file: "{key_file}"}}\n')
    unset = {"ELICITHUB_SECRET_KEY": None}
    first = runner.invoke(app, ["key", "init", "--config", str(config)], env=unset)
    assert first.exit_code == 0, first.output
    assert first.stdout == f"master key: made in {key_file}\n"
    made = key_file.read_text()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    again = runner.invoke(app, ["key", "init", "--config", str(config)], env=unset)
    assert again.stdout == f"master key: in {key_file}\n"
    assert key_file.read_text() == made


def test_key_init_makes_nothing_when_the_variable_holds_the_key(tmp_path: Path) -> None:
    key_file = tmp_path / "secret.key"
    config = write(tmp_path, f'secrets: {{key_file: "{key_file}"}}\n')
    given = {"ELICITHUB_SECRET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode()}
    result = runner.invoke(app, ["key", "init", "--config", str(config)], env=given)
    assert result.exit_code == 0, result.output
    assert result.stdout == "master key: from $ELICITHUB_SECRET_KEY\n"
    assert not key_file.exists()


def test_key_init_refuses_an_unusable_key_and_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "secret.key"
    empty.touch(mode=0o600)
    config = write(tmp_path, f'secrets: {{key_file: "{empty}"}}\n')
    result = runner.invoke(app, ["key", "init", "--config", str(config)], env={"ELICITHUB_SECRET_KEY": None})
    assert result.exit_code == 2
    assert result.stderr == f"error: {empty}: the key must be at least 32 bytes\n"
    short = runner.invoke(app, ["key", "init", "--config", str(config)], env={"ELICITHUB_SECRET_KEY": "short"})
    assert short.exit_code == 2
    assert "ELICITHUB_SECRET_KEY: the key must be at least 32 bytes" in short.stderr


def test_key_init_that_cannot_write_the_key_file_says_where_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "not-a-folder").touch()
    key_file = tmp_path / "not-a-folder" / "secret.key"
    config = write(tmp_path, f'secrets: {{key_file: "{key_file}"}}\n')
    result = runner.invoke(app, ["key", "init", "--config", str(config)], env={"ELICITHUB_SECRET_KEY": None})
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'not-a-folder'}: File exists\n"
