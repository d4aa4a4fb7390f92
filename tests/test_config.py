"""The YAML config: defaults, a full valid file, and errors that name the key path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from elicithub.config import Config, ConfigError, DemoConfig, load_config, parse_config

FULL = """\
public_url: http://hub.example.test:8700      # base of links put in url-mode elicitations
store: {url: "sqlite:///.elicithub/hub.db"}
model: {kind: openai, base_url: "http://127.0.0.1:11434/v1", model: llama3, api_key_env: OPENAI_KEY}
users:
  - {id: alice, token: alice-secret}
  - {id: bob, token: bob-secret-1}
elicitation: {timeout_s: 120}
mcp_servers:
  - id: deploy
    url: http://127.0.0.1:9100/mcp
    credential_scope: none
  - id: tracker
    url: http://127.0.0.1:9200/mcp
    credential_scope: user
    protocol: legacy
    oauth: {client_id: hub-client, client_secret_env: TRACKER_SECRET, scopes: [issues.read, issues.write]}
"""

URL_SCHEMES = "must be memory://, sqlite:///PATH, redis://HOST:PORT/DB or postgresql://USER:PASS@HOST/DB"


def server(**fields: Any) -> dict[str, Any]:
    return {"id": "deploy", "url": "http://127.0.0.1:9100/mcp", **fields}


def error_of(data: Any) -> str:
    with pytest.raises(ConfigError) as excinfo:
        parse_config(data)
    return str(excinfo.value)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hub.yaml"
    path.write_text(text)
    return path


def test_no_file_means_embedded_defaults() -> None:
    config = load_config(None)
    assert config == Config(demo=DemoConfig(enabled=True))
    assert config.store.url == "sqlite:///.elicithub/hub.db"
    assert config.model.kind == "scripted"
    assert config.elicitation.timeout_s == 600
    assert config.public_url == "http://127.0.0.1:8700"
    assert config.users == []
    assert config.mcp_servers == []


@pytest.mark.parametrize("text", ["", "# nothing but a comment\n", "null\n", "{}\n"])
def test_empty_file_means_defaults(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text)) == Config()


def test_full_valid_file_is_read_completely(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    assert config.public_url == "http://hub.example.test:8700"
    assert config.store.url == "sqlite:///.elicithub/hub.db"
    assert config.model.kind == "openai"
    assert config.model.model == "llama3"
    assert config.model.base_url == "http://127.0.0.1:11434/v1"
    assert config.model.api_key_env == "OPENAI_KEY"
    assert [(u.id, u.token) for u in config.users] == [("alice", "alice-secret"), ("bob", "bob-secret-1")]
    assert config.elicitation.timeout_s == 120

    deploy, tracker = config.mcp_servers
    assert (deploy.id, deploy.url, deploy.command) == ("deploy", "http://127.0.0.1:9100/mcp", None)
    assert deploy.credential_scope == "none"
    assert deploy.protocol == "auto"
    assert deploy.oauth is None
    assert (tracker.id, tracker.url, tracker.command) == ("tracker", "http://127.0.0.1:9200/mcp", None)
    assert tracker.credential_scope == "user"
    assert tracker.protocol == "legacy"
    assert tracker.oauth is not None
    assert tracker.oauth.client_id == "hub-client"
    assert tracker.oauth.client_secret_env == "TRACKER_SECRET"
    assert tracker.oauth.scopes == ["issues.read", "issues.write"]

    assert config.downstream_server("tracker") is tracker
    assert config.downstream_server("missing") is None


def test_memory_store_url_is_accepted() -> None:
    assert parse_config({"store": {"url": "memory://"}}).store.url == "memory://"


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "redis://cache.internal:6380/3", "redis://localhost"])
def test_redis_store_urls_are_accepted(url: str) -> None:
    assert parse_config({"store": {"url": url}}).store.url == url


@pytest.mark.parametrize(
    "url", ["postgresql://hub:secret@db.internal:5432/hub", "postgres://db/hub", "postgresql:///hub?host=/run/pg"]
)
def test_postgres_store_urls_are_accepted(url: str) -> None:
    assert parse_config({"store": {"url": url}}).store.url == url


def test_a_store_url_is_shown_without_its_password() -> None:
    store = parse_config({"store": {"url": "postgresql://hub:s3cret@db:5432/hub"}}).store
    assert store.shown_url == "postgresql://hub:***@db:5432/hub"
    assert parse_config({"store": {"url": "postgres://db/hub"}}).store.shown_url == "postgres://db/hub"


def test_store_pool_and_timeout_errors_name_their_key() -> None:
    assert error_of({"store": {"pool_size": 0}}) == "store.pool_size: input should be greater than or equal to 1"
    timeout = error_of({"store": {"statement_timeout_s": -1}})
    assert timeout == "store.statement_timeout_s: input should be greater than 0"
    assert error_of({"store": {"allow_eviction": "maybe"}}).startswith("store.allow_eviction: ")


def test_metrics_are_on_unless_turned_off_and_errors_name_the_key() -> None:
    assert parse_config({}).metrics.enabled is True
    assert parse_config({"metrics": {"enabled": False}}).metrics.enabled is False
    assert error_of({"metrics": {"enabled": "maybe"}}).startswith("metrics.enabled: ")
    assert error_of({"metrics": {"port": 9100}}) == "metrics.port: unknown key"


def test_limits_are_off_unless_set_and_errors_name_the_key() -> None:
    limits = parse_config({}).limits
    assert limits.max_active_runs is None and limits.per_user.model_dump() == {
        "requests_per_minute": None,
        "active_runs": None,
        "pending_questions": None,
    }
    assert parse_config({}).server.trusted_proxies == []
    given = {
        "per_user": {"requests_per_minute": 120, "active_runs": 8, "pending_questions": 100},
        "max_active_runs": 500,
    }
    assert parse_config({"limits": given}).limits.per_user.active_runs == 8
    assert (
        error_of({"limits": {"max_active_runs": 0}})
        == "limits.max_active_runs: input should be greater than or equal to 1"
    )
    assert error_of({"limits": {"per_user": {"runs": 3}}}) == "limits.per_user.runs: unknown key"
    assert parse_config({"server": {"trusted_proxies": ["10.0.0.0/8", "::1", "192.0.2.7"]}}).server.trusted_proxies
    refused = error_of({"server": {"trusted_proxies": ["10.0.0.0/8", "proxy.local"]}})
    assert refused == "server.trusted_proxies: 'proxy.local' is not an IP address or network (CIDR)"


def test_native_approvals_are_off_unless_turned_on_and_errors_name_the_key() -> None:
    assert parse_config({}).ui_stream.native_approvals is False
    assert parse_config({"ui_stream": {"native_approvals": True}}).ui_stream.native_approvals is True
    assert error_of({"ui_stream": {"native_approvals": "maybe"}}).startswith("ui_stream.native_approvals: ")
    assert error_of({"ui_stream": {"native": True}}) == "ui_stream.native: unknown key"


def test_the_widget_session_lasts_eight_hours_unless_auth_oidc_session_s_says_and_its_errors_name_the_key() -> None:
    oidc = {"issuer": "https://login.example.com", "audience": "elicithub"}
    config = parse_config({"auth": {"oidc": oidc}}).auth.oidc
    assert config is not None and config.session_s == 8 * 3600
    shorter = parse_config({"auth": {"oidc": {**oidc, "session_s": 3600}}}).auth.oidc
    assert shorter is not None and shorter.session_s == 3600
    too_short = error_of({"auth": {"oidc": {**oidc, "session_s": 0}}})
    assert too_short == "auth.oidc.session_s: input should be greater than or equal to 60"
    too_long = error_of({"auth": {"oidc": {**oidc, "session_s": 31 * 24 * 3600}}})
    assert too_long == "auth.oidc.session_s: input should be less than or equal to 2592000"
    assert error_of({"auth": {"oidc": {**oidc, "session_s": "all day"}}}).startswith("auth.oidc.session_s: ")


def test_config_is_frozen() -> None:
    config = parse_config({})
    with pytest.raises(ValidationError):
        config.public_url = "http://elsewhere"


def test_unknown_top_level_key_is_named() -> None:
    assert error_of({"colour": "red"}) == "colour: unknown key"


def test_unknown_nested_key_is_named_with_its_path() -> None:
    assert error_of({"mcp_servers": [server(colour="red")]}) == "mcp_servers[0].colour: unknown key"
    assert error_of({"store": {"url": "memory://", "size": 1}}) == "store.size: unknown key"
    assert (
        error_of({"mcp_servers": [server(), server(id="other", oauth={"client_id": "x", "colour": 1})]})
        == "mcp_servers[1].oauth.colour: unknown key"
    )


def test_bad_literal_lists_the_allowed_values() -> None:
    assert (
        error_of({"mcp_servers": [server(credential_scope="team")]})
        == "mcp_servers[0].credential_scope: must be one of none, project, user"
    )
    assert error_of({"model": {"kind": "gpt"}}) == "model.kind: must be one of scripted, openai"


@pytest.mark.parametrize(
    "url",
    [
        *("sqlite://hub.db", "mysql://db/hub", "postgresql://", ""),
        *("redis://", "redis://h/db0", "redis://h:port/0", "redis:/h"),
    ],
)
def test_bad_store_url_is_named(url: str) -> None:
    assert error_of({"store": {"url": url}}) == f"store.url: {URL_SCHEMES}"


def test_openai_model_needs_a_model_name() -> None:
    assert error_of({"model": {"kind": "openai"}}) == "model.model: is required when kind is openai"
    assert error_of({"model": {"kind": "openai", "model": ""}}) == "model.model: is required when kind is openai"
    assert parse_config({"model": {"kind": "openai", "model": "gpt-x"}}).model.model == "gpt-x"


def test_server_with_both_url_and_command_is_an_error() -> None:
    message = error_of({"mcp_servers": [server(command=["python", "server.py"])]})
    assert message == "mcp_servers[0]: give exactly one of url (streamable HTTP) or command (stdio)"


def test_server_with_neither_url_nor_command_is_an_error() -> None:
    message = error_of({"mcp_servers": [server(), {"id": "bare"}]})
    assert message == "mcp_servers[1]: give exactly one of url (streamable HTTP) or command (stdio)"


def test_server_url_must_be_http_and_command_not_empty() -> None:
    assert error_of({"mcp_servers": [server(url="ftp://host/mcp")]}) == "mcp_servers[0].url: must be an http(s) URL"
    assert error_of({"mcp_servers": [{"id": "local", "command": []}]}) == "mcp_servers[0].command: must not be empty"


def test_server_without_id_is_named() -> None:
    assert error_of({"mcp_servers": [{"url": "http://127.0.0.1:9100/mcp"}]}) == "mcp_servers[0].id: is required"


def test_duplicate_server_ids_are_an_error() -> None:
    data = {"mcp_servers": [server(), server(url=None, command=["python", "other.py"]), server(id="x")]}
    assert error_of(data) == "mcp_servers: duplicate id deploy"


def test_duplicate_users_and_shared_tokens_are_errors() -> None:
    assert (
        error_of({"users": [{"id": "a", "token": "token-one"}, {"id": "a", "token": "token-two"}]})
        == "users: duplicate id a"
    )
    assert (
        error_of({"users": [{"id": "a", "token": "token-one"}, {"id": "b", "token": "token-one"}]})
        == "users: two users share a token"
    )


def test_bad_numbers_are_named() -> None:
    assert error_of({"elicitation": {"timeout_s": 0}}).startswith("elicitation.timeout_s: ")
    assert error_of({"elicitation": {"timeout_s": "soon"}}).startswith("elicitation.timeout_s: ")


def test_every_bad_key_is_reported_one_per_line() -> None:
    message = error_of({"colour": 1, "store": {"url": "redis://h/zero"}, "mcp_servers": [server(credential_scope="x")]})
    assert sorted(message.splitlines()) == [
        "colour: unknown key",
        "mcp_servers[0].credential_scope: must be one of none, project, user",
        f"store.url: {URL_SCHEMES}",
    ]


def test_invalid_yaml_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "mcp_servers: [\n  - id: deploy\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert str(excinfo.value).startswith(f"{path}: not valid YAML")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert str(excinfo.value) == f"{path}: the top level must be a mapping of keys"


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert str(excinfo.value) == f"cannot read {path}: No such file or directory"


def test_errors_from_a_file_name_the_key_path(tmp_path: Path) -> None:
    path = write(tmp_path, "mcp_servers:\n  - id: deploy\n    url: http://127.0.0.1:9100/mcp\n    colour: red\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert str(excinfo.value) == "mcp_servers[0].colour: unknown key"


def test_slack_section_names_its_bad_keys() -> None:
    config = parse_config({"slack": {"users": {"U012ABC": "alice"}}})
    assert config.slack is not None and config.slack.bot_token_env == "SLACK_BOT_TOKEN"
    assert config.slack.api_url == "https://slack.com/api/" and config.slack.agent == "assistant"
    assert parse_config({}).slack is None
    assert error_of({"slack": {"bot_token": "xoxb-1"}}) == "slack.bot_token: unknown key"
    assert "slack.users: 'alice' is not a Slack user id" in error_of({"slack": {"users": {"alice": "alice"}}})
    assert error_of({"slack": {"api_url": "slack.com"}}).startswith("slack.api_url:")
    assert error_of({"slack": {"agent": "nobody"}}) == "slack.agent: no agent nobody"


TENANT = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
ALICE_OID = "0A1B2C3D-0000-4000-8000-00000000A11C"


def test_teams_section_takes_names_of_variables_and_names_its_bad_keys() -> None:
    config = parse_config({"teams": {"tenant_id": TENANT, "users": {ALICE_OID: "alice"}}})
    teams = config.teams
    assert teams is not None and (teams.app_id_env, teams.app_password_env) == ("TEAMS_APP_ID", "TEAMS_APP_PASSWORD")
    assert teams.users == {ALICE_OID.lower(): "alice"}  # as Teams writes object ids
    assert teams.login_url == "https://login.microsoftonline.com/" and teams.service_url is None
    assert teams.openid_metadata_url == "https://login.botframework.com/v1/.well-known/openidconfiguration"
    assert parse_config({}).teams is None
    assert error_of({"teams": {}}) == "teams.tenant_id: is required"
    assert error_of({"teams": {"tenant_id": "acme"}}).startswith("teams.tenant_id:")
    assert error_of({"teams": {"tenant_id": TENANT, "app_password": "s3cret"}}) == "teams.app_password: unknown key"
    assert "teams.users: 'alice' is not a Teams user's Entra object id" in error_of(
        {"teams": {"tenant_id": TENANT, "users": {"alice": "alice"}}}
    )
    assert error_of({"teams": {"tenant_id": TENANT, "users": {ALICE_OID: ""}}}).startswith("teams.users:")
    assert error_of({"teams": {"tenant_id": TENANT, "login_url": "login"}}).startswith("teams.login_url:")
    assert error_of({"teams": {"tenant_id": TENANT, "service_url": "smba"}}).startswith("teams.service_url:")
    assert error_of({"teams": {"tenant_id": TENANT, "agent": "nobody"}}) == "teams.agent: no agent nobody"


def agent(**fields: Any) -> dict[str, Any]:
    return {"id": "travel", "url": "http://127.0.0.1:9300", **fields}


def test_a2a_agents_are_read_with_their_defaults() -> None:
    data = {"a2a_agents": [agent(), agent(id="bank", credential_scope="project", credential_env="BANK", timeout_s=5)]}
    travel, bank = parse_config(data).a2a_agents
    assert (travel.id, travel.url, travel.credential_scope, travel.timeout_s) == (
        "travel",
        "http://127.0.0.1:9300",
        "none",
        120,
    )
    assert travel.display_name == "Travel"
    assert (bank.credential_env, bank.timeout_s) == ("BANK", 5)


def test_a2a_agent_errors_name_the_key() -> None:
    assert error_of({"a2a_agents": [{"id": "travel"}]}) == "a2a_agents[0].url: is required"
    assert error_of({"a2a_agents": [agent(colour="red")]}) == "a2a_agents[0].colour: unknown key"
    assert error_of({"a2a_agents": [agent(url="ftp://x")]}) == "a2a_agents[0].url: must be an http(s) URL"
    assert (
        error_of({"a2a_agents": [agent(credential_scope="team")]})
        == "a2a_agents[0].credential_scope: must be one of none, project, user"
    )
    assert (
        error_of({"a2a_agents": [agent(credential_scope="project")]})
        == "a2a_agents[0].credential_env: is required when credential_scope is project"
    )
    assert error_of({"a2a_agents": [agent(timeout_s=0)]}).startswith("a2a_agents[0].timeout_s: ")


def test_a2a_agent_ids_clash_with_neither_agents_nor_servers() -> None:
    assert error_of({"a2a_agents": [agent(), agent()]}) == "a2a_agents: id travel is already taken"
    assert error_of({"mcp_servers": [server(id="travel")], "a2a_agents": [agent()]}) == (
        "a2a_agents: id travel is already taken"
    )


def test_a_sign_in_finds_its_service_among_servers_and_agents() -> None:
    config = parse_config({"mcp_servers": [server()], "a2a_agents": [agent(credential_scope="user")]})
    assert config.service("deploy") is config.mcp_servers[0]
    assert config.service("travel") is config.a2a_agents[0]
    assert config.service("nobody") is None


def test_an_agent_may_use_an_a2a_agent_as_a_tool() -> None:
    config = parse_config({"a2a_agents": [agent()], "agents": [{"id": "assistant", "tools": ["travel"]}]})
    assert config.agent("assistant").tools == ["travel"]
    assert (
        error_of({"a2a_agents": [agent()], "agents": [{"id": "travel"}]}) == "agents.0.id: travel is also a server id"
    )


def test_tasks_is_auto_unless_set_and_a_bad_value_names_its_key_path() -> None:
    server = {"id": "deploy", "url": "http://127.0.0.1:9100/mcp"}
    assert parse_config({"mcp_servers": [server]}).mcp_servers[0].tasks == "auto"
    assert parse_config({"mcp_servers": [{**server, "tasks": "off"}]}).mcp_servers[0].tasks == "off"
    with pytest.raises(ConfigError) as excinfo:
        parse_config({"mcp_servers": [{**server, "tasks": "sometimes"}]})
    assert "mcp_servers[0].tasks: must be one of auto, on, off" in str(excinfo.value)


def test_strings_take_environment_variables_with_defaults() -> None:
    environ = {"REDIS_HOST": "redis.internal", "TIMEOUT": "90", "EMPTY": ""}
    data = {
        "store": {"url": "redis://${REDIS_HOST}:${REDIS_PORT:-6379}/0"},
        "elicitation": {"timeout_s": "${TIMEOUT}"},
        "public_url": "https://${PUBLIC_HOST:-hub.example.test}",
        "users": [{"id": "alice", "token": "${EMPTY:-alice-secret}"}, {"id": "bob", "token": "pa$$word-${TIMEOUT}"}],
    }
    config = parse_config(data, environ=environ)
    assert config.store.url == "redis://redis.internal:6379/0"
    assert config.elicitation.timeout_s == 90
    assert config.public_url == "https://hub.example.test"
    assert [u.token for u in config.users] == ["alice-secret", "pa$word-90"]


def test_an_unset_variable_without_a_default_names_the_key_path_and_the_variable() -> None:
    data = {"store": {"url": "postgresql://hub:${PG_PASSWORD}@db/hub"}, "mcp_servers": [server(url="${DEPLOY_URL}")]}
    with pytest.raises(ConfigError) as excinfo:
        parse_config(data, environ={})
    lines = str(excinfo.value).splitlines()
    assert lines == [
        "store.url: environment variable PG_PASSWORD is not set (write ${PG_PASSWORD:-...} for a default)",
        "mcp_servers[0].url: environment variable DEPLOY_URL is not set (write ${DEPLOY_URL:-...} for a default)",
    ]


def test_an_interpolated_value_is_validated_like_a_written_one() -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_config({"server": {"drain_s": "${DRAIN}"}}, environ={"DRAIN": "-1"})
    assert str(excinfo.value) == "server.drain_s: input should be greater than or equal to 0"


def test_a_file_reads_the_process_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUB_PUBLIC_URL", "https://hub.example.test")
    config = load_config(write(tmp_path, "public_url: ${HUB_PUBLIC_URL}\nserver: {drain_s: 0}\n"))
    assert config.public_url == "https://hub.example.test"
    assert config.server.drain_s == 0
    assert load_config(None).server.drain_s == 10


def test_admins_are_user_ids_and_the_admin_group_is_read_with_its_claim() -> None:
    oidc = {"issuer": "https://login.example.test", "audience": "elicithub"}
    config = parse_config({"admins": ["alice", "ops@example.test"], "auth": {"oidc": {**oidc, "admin_group": "ops"}}})
    assert config.admins == ["alice", "ops@example.test"]
    assert config.auth.oidc is not None
    assert (config.auth.oidc.admin_group, config.auth.oidc.groups_claim) == ("ops", "groups")
    assert parse_config({}).admins == []
    roles = parse_config({"auth": {"oidc": {**oidc, "groups_claim": "roles"}}}).auth.oidc
    assert roles is not None and (roles.admin_group, roles.groups_claim) == (None, "roles")


@pytest.mark.parametrize(
    ("admins", "error"),
    [
        ("alice", "admins: input should be a valid list"),
        ({"alice": True}, "admins: input should be a valid list"),
        ([1], "admins[0]: input should be a valid string"),
        (["alice", {"id": "bob"}], "admins[1]: input should be a valid string"),
        (["alice", ""], "admins[1]: string should have at least 1 character"),
    ],
)
def test_admins_of_another_shape_name_the_key_path(admins: Any, error: str) -> None:
    assert error_of({"admins": admins}) == error


def test_admin_group_and_groups_claim_of_another_shape_name_the_key_path() -> None:
    oidc = {"issuer": "https://login.example.test", "audience": "elicithub"}
    assert error_of({"auth": {"oidc": {**oidc, "admin_group": ["ops"]}}}) == (
        "auth.oidc.admin_group: input should be a valid string"
    )
    assert error_of({"auth": {"oidc": {**oidc, "groups_claim": ""}}}) == (
        "auth.oidc.groups_claim: string should have at least 1 character"
    )


GPT = {"id": "gpt", "provider": "openai", "model": "gpt-5-mini", "api_key_env": "OPENAI_API_KEY"}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            {"models": [{**GPT, "provider": "mistral"}]},
            "models[0].provider: must be one of openai, anthropic, google, openai-compatible",
        ),
        ({"models": [{**GPT, "settings": {"temprature": 0.2}}]}, "models[0].settings.temprature: unknown key"),
        ({"models": [{k: v for k, v in GPT.items() if k != "model"}]}, "models[0].model: is required"),
        (
            {"models": [GPT], "agents": [{"id": "assistant", "model": "claude"}]},
            "agents[0].model: no model claude in models",
        ),
        ({"models": [GPT], "model": "claude"}, "model: no model claude in models"),
        ({"models": [GPT, GPT]}, "models: duplicate id gpt"),
        (
            {"models": [{**GPT, "provider": "openai-compatible"}]},
            "models[0].base_url: is required when provider is openai-compatible",
        ),
        ({"models": [{**GPT, "api_key_env": None}]}, "models[0].api_key_env: is required when provider is openai"),
        (
            {"models": [{**GPT, "settings": {"max_tokens": 0}}]},
            "models[0].settings.max_tokens: input should be greater than 0",
        ),
        (
            {"agents": [{"id": "assistant", "max_steps": 0}]},
            "agents[0].max_steps: input should be greater than or equal to 1",
        ),
        (
            {"agents": [{"id": "assistant", "instructions": "a", "instructions_file": "b"}]},
            "agents[0].instructions_file: give instructions or instructions_file, not both",
        ),
    ],
)
def test_a_bad_model_or_agent_is_an_error_naming_its_key(data: dict[str, Any], error: str) -> None:
    assert error_of(data) == error


def test_models_and_agents_pick_their_models_and_v1_models_still_work(tmp_path: Path) -> None:
    claude = {"id": "claude", "provider": "anthropic", "model": "claude-sonnet-4-5", "api_key_env": "ANTHROPIC_API_KEY"}
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "assistant.md").write_text("You are the release assistant of ACME.\n")
    path = write(
        tmp_path,
        json.dumps(
            {
                "models": [GPT, claude],
                "model": "gpt",
                "agents": [
                    {
                        "id": "assistant",
                        "model": "claude",
                        "instructions_file": "prompts/assistant.md",
                        "max_steps": 12,
                    },
                    {"id": "researcher"},
                ],
            }
        ),
    )
    config = load_config(path)
    assistant, researcher = config.agents
    assert config.model_of(assistant).model == "claude-sonnet-4-5"  # type: ignore[union-attr]
    assert config.model_of(researcher) == config.default_model() == config.models[0]
    assert (assistant.instructions, assistant.max_steps, researcher.max_steps) == (
        "You are the release assistant of ACME.\n",
        12,
        8,
    )
    assert parse_config({}).default_model().kind == "scripted"  # type: ignore[union-attr]
    v1 = parse_config({"model": {"kind": "openai", "model": "gpt-4o-mini", "api_key_env": "K"}}).default_model()
    assert v1.kind == "openai"  # type: ignore[union-attr]
    missing = write(tmp_path, json.dumps({"agents": [{"id": "assistant", "instructions_file": "nope.md"}]}))
    with pytest.raises(ConfigError, match=r"agents\[0\].instructions_file: cannot read"):
        load_config(missing)
