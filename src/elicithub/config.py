"""The hub's YAML configuration: pydantic models, loading, and errors that name the key path."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from elicithub.config_approvals import ApprovalPolicy, AuditConfig, check_approvals
from elicithub.config_env import interpolate
from elicithub.core.jsoncodec import JsonObject
from elicithub.errors import HubError


class ConfigError(HubError):
    """The config cannot be used; the message names every bad key path."""


class _Strict(BaseModel):
    # A field's docstring is its description: the docs' configuration reference is generated from them.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class StoreConfig(_Strict):
    """Where the hub keeps questions, paused runs, conversations and tokens; Redis and Postgres are shared by hubs."""

    url: str = "sqlite:///.elicithub/hub.db"
    """`memory://`, `sqlite:///PATH`, `redis://HOST:PORT/DB` or `postgresql://USER:PASS@HOST/DB`."""
    heartbeat_s: float = Field(default=5, gt=0, le=60)
    """How often a hub says it is alive (Redis, Postgres); after three silent beats other hubs take over its runs."""
    pool_size: int = Field(default=10, ge=1, le=1000)
    """Postgres: the connections each hub keeps at most (plus one that listens)."""
    statement_timeout_s: float = Field(default=30, gt=0, le=3600)
    """Postgres: how long one statement may run before the server stops it."""
    allow_eviction: bool = False
    """Redis: run even though its maxmemory-policy lets it evict keys (pending questions and tokens may vanish)."""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if url != "memory://" and not re.match(
            r"^sqlite:///|^redis://[^\s/:@]+(:\d+)?(/\d+)?$|^postgres(ql)?://\S+$", url
        ):
            raise ValueError(
                "must be memory://, sqlite:///PATH, redis://HOST:PORT/DB or postgresql://USER:PASS@HOST/DB"
            )
        return url

    @property
    def shown_url(self) -> str:
        """The URL without its password, to print or log."""
        return re.sub(r"^(postgres(?:ql)?://[^:/@]*:)[^@/]*@", r"\1***@", self.url)


class ModelConfig(_Strict):
    """The model that runs the agents: the deterministic scripted one, or an OpenAI-compatible endpoint."""

    kind: Literal["scripted", "openai"] = "scripted"
    """`scripted` (`/call SERVER.TOOL {json}` calls a tool; anything else gets help) or `openai`."""
    base_url: str | None = None
    """openai: the endpoint's base URL (the OpenAI API when unset)."""
    model: str | None = None
    """openai: the model's name (required)."""
    api_key_env: str | None = None
    """openai: the environment variable holding the API key."""

    @model_validator(mode="after")
    def _openai_needs_a_model(self) -> ModelConfig:
        if self.kind == "openai" and not self.model:
            raise ValueError("model: is required when kind is openai")
        return self


class UserConfig(_Strict):
    """A static user and their bearer token (development and tests; a deployment names its identity provider)."""

    id: str = Field(min_length=1)
    """The hub user."""
    token: str = Field(min_length=8)
    """Their bearer token."""


class ElicitationConfig(_Strict):
    """How long a question waits for its answer, and how many rounds of questions one tool call may ask."""

    timeout_s: float = Field(default=600, gt=0)
    """A question's deadline: then it expires and the tool says nobody answered."""
    max_rounds: int = Field(default=10, ge=1, le=100)
    """Rounds of questions one tool call may ask (InputRequiredResult rounds, a task's or an A2A agent's)."""


class StreamsConfig(_Strict):
    """The chat streams."""

    keepalive_s: float = Field(default=15, gt=0)
    """How often a stream that waits gets a `: keep-alive` comment line, so proxies do not cut it."""


class UIStreamConfig(_Strict):
    """The AI SDK UI message stream (`/run/api/chat`). `native_approvals`: a question approving the requester's own
    call is AI SDK 6's `tool-approval-request` (answered by an `approval-responded` tool part), not a data part."""

    native_approvals: bool = False


class LimitsConfig(_Strict):
    """What the hub takes from a caller."""

    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    """Larger request bodies get 413."""


class ServerConfig(_Strict):
    """How the process stops: on SIGTERM it turns not-ready, serves `drain_s` more seconds, then ends its streams."""

    drain_s: float = Field(default=10, ge=0, le=3600)
    """Seconds a hub stays not-ready but serving after SIGTERM; give the orchestrator `drain_s + 5` to stop it."""


class MetricsConfig(_Strict):
    """`GET /metrics` in Prometheus text format; off, the hub serves no such page and counts nothing for it."""

    enabled: bool = True
    """Whether the hub serves `/metrics` (off: a 404)."""


class ConversationsConfig(_Strict):
    """How long the store keeps an idle conversation (its transcript and event log), and how much of its log."""

    retention_s: float = Field(default=7 * 24 * 3600, gt=0)
    """How long an idle conversation is kept (and an MCP or A2A task of the hub's)."""
    max_events: int = Field(default=1000, ge=100, le=100_000)
    """How many of a conversation's newest log entries are kept."""


class OAuthConfig(_Strict):
    """A pre-registered OAuth client; endpoints are discovered (RFC 9728, RFC 8414) unless given here."""

    client_id: str | None = None
    """Without it the hub names its client ID metadata document where the server takes one, else registers (RFC
    7591)."""
    client_secret_env: str | None = None
    """The environment variable holding the client's secret."""
    scopes: list[str] = []
    """The scopes to ask for; unset: the server's challenge's, else its metadata's `scopes_supported`."""
    issuer: str | None = Field(default=None, pattern=r"^https?://")
    """The authorization server, when the server's metadata does not name it."""
    authorization_endpoint: str | None = Field(default=None, pattern=r"^https?://")
    """For a provider without metadata, with `token_endpoint` and `client_id`."""
    token_endpoint: str | None = Field(default=None, pattern=r"^https?://")
    """For a provider without metadata, with `authorization_endpoint`."""
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = None
    """How a client with a secret authenticates at the token endpoint; by default chosen from the server's metadata."""

    @model_validator(mode="after")
    def _both_endpoints(self) -> OAuthConfig:
        if (self.authorization_endpoint is None) != (self.token_endpoint is None):
            raise ValueError("give both authorization_endpoint and token_endpoint, or neither")
        if self.authorization_endpoint is not None and self.client_id is None:
            raise ValueError("client_id: is required with explicit endpoints (there is no registration endpoint)")
        return self


class ToolConfig(_Strict):
    """A tool the hub can offer before anyone has signed in to a user-scoped server (it cannot list them then)."""

    name: str = Field(min_length=1)
    """The tool's name at its server."""
    description: str = ""
    """What the model is told the tool does."""
    input_schema: JsonObject = {"type": "object"}
    """The JSON Schema of its arguments."""


class ServiceConfig(_Strict):
    """What every downstream service (MCP server, A2A agent) has: its id, name, and how the hub gets a credential."""

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    """The prefix of its tools' names (`ID.TOOL`)."""
    name: str | None = None
    """How people see the service ("Tracker"); defaults to the id, capitalised."""
    url: str | None = None
    """Where it is (http or https)."""
    credential_scope: Literal["none", "project", "user"] = "none"
    """No credential, one token shared by everyone (`project`), or each user's own, asked as a sign-in (`user`)."""
    credential_env: str | None = None
    """project scope: the environment variable holding the shared token."""
    oauth: OAuthConfig | None = None
    """user scope: a pre-registered OAuth client, or endpoints; else everything is discovered."""

    @property
    def display_name(self) -> str:
        return self.name or self.id[:1].upper() + self.id[1:]

    def _check_credentials(self) -> None:
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError("url: must be an http(s) URL")
        if self.credential_scope == "project" and not self.credential_env:
            raise ValueError("credential_env: is required when credential_scope is project")


class McpServerConfig(ServiceConfig):
    """A downstream MCP server: its tools are the agents' as `ID.TOOL`, reached over streamable HTTP or stdio."""

    command: list[str] | None = None
    """A server over stdio: its command line, instead of `url` (one process per call)."""
    tools: list[ToolConfig] = []
    """Tools offered before anyone has signed in to a user-scoped server; they override its listing."""
    protocol: Literal["auto", "legacy", "2026-07-28"] = "auto"
    """Which protocol era to speak: auto discovers 2026-07-28 and falls back to the handshake;
    legacy forces the 2025-11-25 handshake (needed for servers that elicit with elicitation/create)."""
    tasks: Literal["auto", "on", "off"] = "auto"
    """Whether calls may become MCP tasks: auto offers them where the server supports them (2026-07-28: the tasks
    extension on every request; 2025-11-25: tools whose taskSupport allows it); on calls every 2025-11-25 tool as
    a task; off never offers one."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of url (streamable HTTP) or command (stdio)")
        if self.command is not None and not self.command:
            raise ValueError("command: must not be empty")
        self._check_credentials()
        if self.credential_scope == "user" and self.url is None:
            raise ValueError("credential_scope: user needs a url (OAuth protects HTTP servers, not stdio)")
        return self


class A2aAgentConfig(ServiceConfig):
    """A downstream A2A agent: one tool `ID.send_message`, described from the agent card found at `url`."""

    url: str
    """Where its agent card is (`/.well-known/agent-card.json` under it)."""
    timeout_s: float = Field(default=120, gt=0)
    """One request to the agent (its work between two questions)."""
    sign_in_grace_s: float = Field(default=5, ge=0)
    """After the person says they signed in at the agent's link: how long its task may take to go on by itself
    before it is told so in a message on the task (many agents wait for one)."""

    @model_validator(mode="after")
    def _http_url(self) -> A2aAgentConfig:
        self._check_credentials()
        return self


class AgentConfig(_Strict):
    """An agent: its own tools (server ids, A2A agent ids, or other agents, which it may delegate to)."""

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    """Its name: the tool `ID.delegate` for other agents, the MCP tool, the chat's `model` or `agent`."""
    description: str = ""
    """What other agents and MCP clients are told it does."""
    tools: list[str] | None = None
    """MCP server, A2A agent and agent ids; unset: every server and A2A agent (no delegation)."""


DEFAULT_AGENT = "assistant"
DEMO_SERVER_IDS = ("tracker", "deploy", "release", "travel")


class SecretsConfig(_Strict):
    """Where the hub's master key comes from: the environment, else a file generated on first run (mode 0600)."""

    key_env: str = "ELICITHUB_SECRET_KEY"
    """The environment variable holding the key: base64url of 32 random bytes."""
    key_file: str = ".elicithub/secret.key"
    """The file holding it, when the variable is unset."""


class DemoConfig(_Strict):
    """The built-in demo servers, dev OAuth provider and signed-in dev user (on when serve runs without config)."""

    enabled: bool = False
    """Whether the demo runs (its tools join the assistant's)."""
    dev_user: str = Field(default="dev", min_length=1)
    """Who the widget signs a browser without a session in as."""
    servers_host: str | None = Field(default=None, pattern=r"^[^\s/:]+$")
    """Where `elicithub demo servers` runs them, a service of their own (hubs sharing a store must share them too);
    unset: each hub runs its own on loopback."""
    servers_port: int = Field(default=9101, ge=1, le=65532)
    """The tracker's port there; deploy, release and travel follow."""


SESSION_S = 8 * 3600
"""How long a widget session lasts by default (`auth.oidc.session_s`; the demo's dev session too)."""


class OidcConfig(_Strict):
    """The company's OpenID provider: its JWTs name hub users on every surface that takes a bearer token."""

    issuer: str = Field(pattern=r"^https?://[^/\s]+")
    """The provider; discovery at `ISSUER/.well-known/openid-configuration`."""
    audience: str = Field(min_length=1)
    """The `aud` a bearer JWT must carry."""
    client_id: str | None = None
    """The widget's sign-in (authorization code + PKCE); unset: no sign-in in the browser."""
    client_secret_env: str | None = None
    """A confidential client's secret, by environment variable; a public client has none."""
    user_claim: str = Field(default="sub", min_length=1)
    """The claim that names the hub user."""
    groups_claim: str = Field(default="groups", min_length=1)
    """The claim listing a person's groups (a list of names), in their JWTs and ID tokens."""
    admin_group: str | None = Field(default=None, min_length=1)
    """Its members are admins of the hub (see `admins`)."""
    scopes: list[str] = ["openid", "profile", "email"]
    """What the sign-in asks for, and what a 401 names."""
    session_s: int = Field(default=SESSION_S, ge=60, le=30 * 24 * 3600)
    """How long a widget session lasts at most; the provider's session bounds it sooner (refresh token refused)."""


class AuthConfig(_Strict):
    """Who callers are: the company's identity provider, and whether anyone unidentified may chat."""

    oidc: OidcConfig | None = None
    """The identity provider; unset: only `users:` tokens (and the demo's dev user)."""
    anonymous: bool = True
    """false: chat needs a user (a bearer token or a signed-in session)."""


class SlackConfig(_Strict):
    """The Slack app surface: secrets come from the environment, never from the config file."""

    bot_token_env: str = Field(default="SLACK_BOT_TOKEN", min_length=1)
    """The environment variable holding the bot token (`xoxb-...`)."""
    signing_secret_env: str = Field(default="SLACK_SIGNING_SECRET", min_length=1)
    """The environment variable holding the app's signing secret."""
    api_url: str = Field(default="https://slack.com/api/", pattern=r"^https?://[^/\s]+")
    """Slack's Web API (tests point it at a stand-in)."""
    users: dict[str, str] = {}
    """Slack user id -> hub user id; anyone else is told they cannot use the app."""
    agent: str = Field(default="assistant", min_length=1)
    """The agent that answers in Slack."""

    @field_validator("users")
    @classmethod
    def _slack_ids(cls, users: dict[str, str]) -> dict[str, str]:
        for slack_id, user_id in users.items():
            if not re.match(r"^[A-Z0-9]+$", slack_id):
                raise ValueError(f"{slack_id!r} is not a Slack user id (like U012ABC)")
            if not user_id:
                raise ValueError(f"{slack_id}: the hub user must not be empty")
        return users


class Config(_Strict):
    """The hub's config file; every key is optional."""

    public_url: str = Field(default="http://127.0.0.1:8700", pattern=r"^https?://[^/\s]+")
    """The base of the links the hub hands out (sign-ins, pages); unset, the address `serve` listens on."""
    store: StoreConfig = StoreConfig()
    model: ModelConfig = ModelConfig()
    users: list[UserConfig] = []
    admins: list[Annotated[str, Field(min_length=1)]] = []
    """User ids that may see and cancel every user's questions."""
    auth: AuthConfig = AuthConfig()
    elicitation: ElicitationConfig = ElicitationConfig()
    streams: StreamsConfig = StreamsConfig()
    ui_stream: UIStreamConfig = UIStreamConfig()
    conversations: ConversationsConfig = ConversationsConfig()
    limits: LimitsConfig = LimitsConfig()
    server: ServerConfig = ServerConfig()
    metrics: MetricsConfig = MetricsConfig()
    mcp_servers: list[McpServerConfig] = []
    a2a_agents: list[A2aAgentConfig] = []
    agents: list[AgentConfig] = [AgentConfig(id=DEFAULT_AGENT)]
    """The agents; the first answers unless a caller picks another."""
    secrets: SecretsConfig = SecretsConfig()
    demo: DemoConfig = DemoConfig()
    slack: SlackConfig | None = None
    """The Slack app; unset: off."""
    groups: dict[str, list[Annotated[str, Field(min_length=1)]]] = {}
    """Static groups of user ids, by group name: approval policies name them (with OIDC, the token's groups count
    too)."""
    approvals: list[ApprovalPolicy] = []
    """Approval policies: the first whose tools match a call decides who approves it."""
    audit: AuditConfig = AuditConfig()
    """How long approvals' records are kept."""

    @model_validator(mode="after")
    def _unique_ids(self) -> Config:
        for field, ids in (("mcp_servers", [s.id for s in self.mcp_servers]), ("users", [u.id for u in self.users])):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            if dupes:
                raise ValueError(f"{field}: duplicate id {', '.join(dupes)}")
        agents = [a.id for a in self.a2a_agents]
        # An agent's id is its tools' prefix, so it may name neither another agent nor an MCP server.
        clashes = sorted({i for i in agents if agents.count(i) > 1 or self.mcp_server(i) is not None})
        if clashes:
            raise ValueError(f"a2a_agents: id {', '.join(clashes)} is already taken")
        tokens = [u.token for u in self.users]
        if len(set(tokens)) != len(tokens):
            raise ValueError("users: two users share a token")
        self._check_agents()
        self._check_approvals()
        return self

    def _check_approvals(self) -> None:
        known = {u.id for u in self.users} | set(self.admins) | {m for ms in self.groups.values() for m in ms}
        known |= set(self.slack.users.values()) if self.slack is not None else set()
        known |= {self.demo.dev_user} if self.demo.enabled else set()
        # The demo brings agents of its own: then not every prefix is known here.
        ids = [*(s.id for s in self.mcp_servers), *(a.id for a in self.a2a_agents), *(a.id for a in self.agents)]
        prefixes = None if self.demo.enabled else set(ids)
        timeout_s = self.elicitation.timeout_s
        check_approvals(self.approvals, self.groups, known, prefixes, timeout_s, self.auth.oidc is not None)

    def _check_agents(self) -> None:
        """Agent ids are unique and differ from tool ids; every tool an agent names exists; no agent delegates to
        itself, directly or through others; the Slack app's agent exists."""
        agents = {a.id: a for a in self.agents}
        if len(agents) != len(self.agents):
            raise ValueError("agents: duplicate id")
        if not agents:
            raise ValueError("agents: at least one agent is needed")
        servers = {s.id for s in [*self.mcp_servers, *self.a2a_agents]} | (
            set(DEMO_SERVER_IDS) if self.demo.enabled else set()
        )
        for index, agent in enumerate(self.agents):
            if agent.id in servers:
                raise ValueError(f"agents.{index}.id: {agent.id} is also a server id")
            for tool in agent.tools or []:
                if tool not in servers and tool not in agents:
                    raise ValueError(f"agents.{index}.tools: no server or agent {tool}")

        def reaches(start: str, seen: tuple[str, ...]) -> None:
            for tool in agents[start].tools or []:
                if tool in agents:
                    if tool in seen:
                        raise ValueError(f"agents: {' -> '.join([*seen, tool])} delegates in a circle")
                    reaches(tool, (*seen, tool))

        for agent_id in agents:
            reaches(agent_id, (agent_id,))
        if self.slack is not None and self.slack.agent not in agents:
            raise ValueError(f"slack.agent: no agent {self.slack.agent}")

    def agent(self, agent_id: str | None) -> AgentConfig:
        """The agent of that id; the first agent (the default) when the id names none (clients often send a fixed
        model name)."""
        return next((a for a in self.agents if a.id == agent_id), self.agents[0])

    def mcp_server(self, server_id: str) -> McpServerConfig | None:
        return next((s for s in self.mcp_servers if s.id == server_id), None)

    def service(self, service_id: str) -> ServiceConfig | None:
        """The MCP server or A2A agent a sign-in is for."""
        return self.mcp_server(service_id) or next((a for a in self.a2a_agents if a.id == service_id), None)


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.startswith(("function-", "literal[")):
            out += f".{part}" if out else part
    return out


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == "literal_error":
        return "must be one of " + ", ".join(re.findall(r"'([^']*)'", error["ctx"]["expected"]))
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "is required"
    message = str(error["msg"]).removeprefix("Value error, ")
    return message[0].lower() + message[1:] if message else message


def parse_config(data: Any, source: str = "config", environ: Mapping[str, str] | None = None) -> Config:
    """Validate a config read from YAML, its `${NAME}` strings taken from `environ` (default: the process's)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys")
    data, unset = interpolate(data, os.environ if environ is None else environ)
    if unset:
        raise ConfigError("\n".join(unset))
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            path = _path(error["loc"])
            message = _message(error)
            # A model-level check names its own key inside the message ("model: is required ...").
            lines.append(f"{path}.{message}" if path and re.match(r"^\w+: ", message) else f"{path}: {message}")
        raise ConfigError("\n".join(line.lstrip(".: ") for line in lines)) from None


def load_config(path: Path | None) -> Config:
    """Read a YAML config; None means the embedded defaults."""
    if path is None:
        return Config(demo=DemoConfig(enabled=True))
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_config(data, str(path))
