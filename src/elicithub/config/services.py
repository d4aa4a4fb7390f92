"""What the agents reach and who they are: downstream MCP servers and A2A agents (and how the hub gets their
credentials), and the agents themselves."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from elicithub.config.base import Strict
from elicithub.core.jsoncodec import JsonObject


class OAuthConfig(Strict):
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


class ToolConfig(Strict):
    """A tool the hub can offer before anyone has signed in to a user-scoped server (it cannot list them then)."""

    name: str = Field(min_length=1)
    """The tool's name at its server."""
    description: str = ""
    """What the model is told the tool does."""
    input_schema: JsonObject = {"type": "object"}
    """The JSON Schema of its arguments."""


class ServiceConfig(Strict):
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


class AgentConfig(Strict):
    """An agent: its own tools (server ids, A2A agent ids, or other agents, which it may delegate to), its model and
    its instructions."""

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    """Its name: the tool `ID.delegate` for other agents, the MCP tool, the chat's `model` or `agent`."""
    description: str = ""
    """What other agents and MCP clients are told it does."""
    tools: list[str] | None = None
    """MCP server, A2A agent and agent ids; unset: every server and A2A agent (no delegation)."""
    model: str | None = None
    """The id of its model in `models:`; unset: the default model (`model:`)."""
    instructions: str | None = None
    """The system prompt of every request it makes to its model (the scripted model has no use for it)."""
    instructions_file: str | None = None
    """A file holding its instructions instead, relative to the config file's folder; one that cannot be read is a
    config error."""
    max_steps: int = Field(default=8, ge=1, le=100)
    """Model turns per run: if the model still calls tools after the last, the run stops, saying so."""

    @model_validator(mode="after")
    def _one_source_of_instructions(self) -> AgentConfig:
        if self.instructions is not None and self.instructions_file is not None:
            raise ValueError("instructions_file: give instructions or instructions_file, not both")
        return self


DEFAULT_AGENT = "assistant"
