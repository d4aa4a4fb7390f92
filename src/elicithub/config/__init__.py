"""The hub's YAML configuration: the whole file's model, its loading, and errors that name the key path.

Each section's models live in a module of their own in this package (`hub`, `auth`, `services`, `surfaces`,
`email`, `approvals`; `base` and `env` hold what they share); every name is imported from here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Discriminator, Field, Tag, ValidationError, model_validator

from elicithub.config.approvals import ApprovalPolicy, AuditConfig, check_approvals
from elicithub.config.auth import SESSION_S, AuthConfig, OidcConfig, UserConfig
from elicithub.config.base import Strict
from elicithub.config.email import EmailConfig, SmtpConfig
from elicithub.config.env import interpolate
from elicithub.config.hub import (
    ConversationsConfig,
    ElicitationConfig,
    LimitsConfig,
    MetricsConfig,
    ModelConfig,
    PerUserLimits,
    SecretsConfig,
    ServerConfig,
    StoreConfig,
)
from elicithub.config.models import ModelEntry, ModelSettingsConfig, Provider
from elicithub.config.services import (
    DEFAULT_AGENT,
    A2aAgentConfig,
    AgentConfig,
    McpServerConfig,
    OAuthConfig,
    ServiceConfig,
    ToolConfig,
)
from elicithub.config.surfaces import McpSurfaceConfig, SlackConfig, StreamsConfig, TeamsConfig, UIStreamConfig
from elicithub.errors import HubError

__all__ = [
    "DEFAULT_AGENT",
    "DEMO_SERVER_IDS",
    "SESSION_S",
    "A2aAgentConfig",
    "AgentConfig",
    "ApprovalPolicy",
    "AuditConfig",
    "AuthConfig",
    "Config",
    "ConfigError",
    "ConversationsConfig",
    "DemoConfig",
    "ElicitationConfig",
    "EmailConfig",
    "LimitsConfig",
    "McpServerConfig",
    "McpSurfaceConfig",
    "MetricsConfig",
    "ModelConfig",
    "ModelEntry",
    "ModelSettingsConfig",
    "OAuthConfig",
    "OidcConfig",
    "PerUserLimits",
    "Provider",
    "SecretsConfig",
    "ServerConfig",
    "ServiceConfig",
    "SlackConfig",
    "SmtpConfig",
    "StoreConfig",
    "StreamsConfig",
    "TeamsConfig",
    "ToolConfig",
    "UIStreamConfig",
    "UserConfig",
    "load_config",
    "parse_config",
]


class ConfigError(HubError):
    """The config cannot be used; the message names every bad key path."""


DEMO_SERVER_IDS = ("tracker", "deploy", "release", "travel")


class DemoConfig(Strict):
    """The built-in demo servers, dev OAuth provider and signed-in dev user (on when serve runs without config)."""

    enabled: bool = False
    """Whether the demo runs (its tools join the assistant's)."""
    dev_user: str = Field(default="dev", min_length=1)
    """Who the hub's pages sign a browser without a session in as (not with `auth.oidc`); an admin of the hub."""
    servers_host: str | None = Field(default=None, pattern=r"^[^\s/:]+$")
    """Where `elicithub demo servers` runs them, a service of their own (hubs sharing a store must share them too);
    unset: each hub runs its own on loopback."""
    servers_port: int = Field(default=9101, ge=1, le=65532)
    """The tracker's port there; deploy, release and travel follow."""


class Config(Strict):
    """The hub's config file; every key is optional."""

    public_url: str = Field(default="http://127.0.0.1:8700", pattern=r"^https?://[^/\s]+")
    """The base of the links the hub hands out (sign-ins, pages); unset, the address `serve` listens on."""
    store: StoreConfig = StoreConfig()
    model: Annotated[
        Annotated[str, Tag("tagged-id")] | Annotated[ModelConfig, Tag("tagged-config")],
        Discriminator(lambda value: "tagged-id" if isinstance(value, str) else "tagged-config"),
    ] = ModelConfig()
    """The default model, which agents without a `model` of their own run on: the id of one of `models:`, or v1's
    `{kind: scripted}` (the default) or `{kind: openai, ...}`."""
    models: list[ModelEntry] = []
    """The providers' models agents may run on, each named once by its id."""
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
    mcp_server: McpSurfaceConfig = McpSurfaceConfig()
    """The hub's own MCP server (`/mcp`)."""
    a2a_agents: list[A2aAgentConfig] = []
    agents: list[AgentConfig] = [AgentConfig(id=DEFAULT_AGENT)]
    """The agents; the first answers unless a caller picks another."""
    secrets: SecretsConfig = SecretsConfig()
    demo: DemoConfig = DemoConfig()
    slack: SlackConfig | None = None
    """The Slack app; unset: off."""
    teams: TeamsConfig | None = None
    """The Microsoft Teams bot; unset: off."""
    email: EmailConfig | None = None
    """Mail to approvers (and people whose questions wait), with links to pages that answer; unset: off."""
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
        clashes = sorted({i for i in agents if agents.count(i) > 1 or self.downstream_server(i) is not None})
        if clashes:
            raise ValueError(f"a2a_agents: id {', '.join(clashes)} is already taken")
        tokens = [u.token for u in self.users]
        if len(set(tokens)) != len(tokens):
            raise ValueError("users: two users share a token")
        self._check_models()
        self._check_agents()
        self._check_approvals()
        return self

    def _check_models(self) -> None:
        """Model ids are unique, and `model:` and every agent's `model` name one of them."""
        ids = [m.id for m in self.models]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"models: duplicate id {', '.join(dupes)}")
        if isinstance(self.model, str) and self.model not in ids:
            raise ValueError(f"model: no model {self.model} in models")
        for index, agent in enumerate(self.agents):
            if agent.model is not None and agent.model not in ids:
                raise ValueError(f"agents[{index}].model: no model {agent.model} in models")

    def model_of(self, agent: AgentConfig) -> ModelEntry | ModelConfig:
        """The model `agent` runs on: its own, else the default."""
        return self.default_model() if agent.model is None else next(m for m in self.models if m.id == agent.model)

    def default_model(self) -> ModelEntry | ModelConfig:
        """The model `model:` names: an entry of `models:`, or v1's own config."""
        chosen = self.model
        return next(m for m in self.models if m.id == chosen) if isinstance(chosen, str) else chosen

    def _check_approvals(self) -> None:
        known = {u.id for u in self.users} | set(self.admins) | {m for ms in self.groups.values() for m in ms}
        known |= set(self.slack.users.values()) if self.slack is not None else set()
        known |= set(self.teams.users.values()) if self.teams is not None else set()
        known |= set(self.email.users) if self.email is not None else set()
        known |= {self.demo.dev_user} if self.demo.enabled else set()
        # The demo brings agents of its own: then not every prefix is known here.
        ids = [*(s.id for s in self.mcp_servers), *(a.id for a in self.a2a_agents), *(a.id for a in self.agents)]
        prefixes = None if self.demo.enabled else set(ids)
        timeout_s = self.elicitation.timeout_s
        check_approvals(self.approvals, self.groups, known, prefixes, timeout_s, self.auth.oidc is not None)

    def _check_agents(self) -> None:
        """Agent ids are unique and differ from tool ids; every tool an agent names exists; no agent delegates to
        itself, directly or through others; the Slack app's and the Teams bot's agents exist."""
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
        if self.teams is not None and self.teams.agent not in agents:
            raise ValueError(f"teams.agent: no agent {self.teams.agent}")

    def agent(self, agent_id: str | None) -> AgentConfig:
        """The agent of that id; the first agent (the default) when the id names none (clients often send a fixed
        model name)."""
        return next((a for a in self.agents if a.id == agent_id), self.agents[0])

    def downstream_server(self, server_id: str) -> McpServerConfig | None:
        return next((s for s in self.mcp_servers if s.id == server_id), None)

    def service(self, service_id: str) -> ServiceConfig | None:
        """The MCP server or A2A agent a sign-in is for."""
        return self.downstream_server(service_id) or next((a for a in self.a2a_agents if a.id == service_id), None)


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.startswith(("function-", "literal[", "tagged-")):
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


def read_instructions(config: Config, folder: Path) -> Config:
    """The config with each agent's `instructions_file` read (relative to `folder`) into its `instructions`."""
    agents = []
    for index, agent in enumerate(config.agents):
        if agent.instructions_file is not None:
            path = folder / agent.instructions_file
            try:
                text = path.read_text()
            except OSError as exc:
                raise ConfigError(f"agents[{index}].instructions_file: cannot read {path}: {exc.strerror}") from None
            agent = agent.model_copy(update={"instructions": text})
        agents.append(agent)
    return config.model_copy(update={"agents": agents})


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
    return read_instructions(parse_config(data, str(path)), path.parent)
