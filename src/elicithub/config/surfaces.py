"""Where people are reached: the chat streams, the AI SDK UI message stream, the hub's MCP server, the Slack app and
the Microsoft Teams bot."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from elicithub.config.base import Strict


class StreamsConfig(Strict):
    """The chat streams."""

    keepalive_s: float = Field(default=15, gt=0)
    """How often a stream that waits gets a `: keep-alive` comment line, so proxies do not cut it."""


class McpSurfaceConfig(Strict):
    """The hub's own MCP server, `/mcp`."""

    tools: bool = True
    """Also offer every downstream tool the caller may use (`SERVER.TOOL`, the hub as a gateway); false: only one
    tool per agent."""


class UIStreamConfig(Strict):
    """The AI SDK UI message stream (`/run/api/chat`). `native_approvals`: a question approving the requester's own
    call is AI SDK 6's `tool-approval-request` (answered by an `approval-responded` tool part), not a data part."""

    native_approvals: bool = False


class SlackConfig(Strict):
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


_GUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
"""How Microsoft Entra writes ids (tenants, apps, users' object ids)."""


class TeamsConfig(Strict):
    """The Microsoft Teams bot surface: its secrets come from the environment, never from the config file."""

    app_id_env: str = Field(default="TEAMS_APP_ID", min_length=1)
    """The environment variable holding the bot's Entra app (client) id."""
    app_password_env: str = Field(default="TEAMS_APP_PASSWORD", min_length=1)
    """The environment variable holding the app's client secret."""
    tenant_id: str = Field(pattern=_GUID)
    """The Entra tenant the bot's app is registered in (a single-tenant bot)."""
    users: dict[str, str] = {}
    """Teams user (their Entra object id, `aadObjectId`) -> hub user id; anyone else is told they cannot use it."""
    agent: str = Field(default="assistant", min_length=1)
    """The agent that answers in Teams."""
    login_url: str = Field(default="https://login.microsoftonline.com/", pattern=r"^https?://[^/\s]+")
    """Where the bot gets its token (client credentials at `{login_url}{tenant_id}/oauth2/v2.0/token`); tests point
    it at a stand-in."""
    openid_metadata_url: str = Field(
        default="https://login.botframework.com/v1/.well-known/openidconfiguration", pattern=r"^https?://[^/\s]+/"
    )
    """The Bot Framework's OpenID metadata: the keys that sign incoming activities are at its `.../keys`."""
    service_url: str | None = Field(default=None, pattern=r"^https?://[^/\s]+")
    """The Bot Connector that approvals' chats are opened at (`https://smba.trafficmanager.net/teams/`); unset, the
    one the latest activity came from."""

    @field_validator("users")
    @classmethod
    def _object_ids(cls, users: dict[str, str]) -> dict[str, str]:
        for object_id, user_id in users.items():
            if not re.match(_GUID, object_id):
                raise ValueError(f"{object_id!r} is not a Teams user's Entra object id (aadObjectId, a GUID)")
            if not user_id:
                raise ValueError(f"{object_id}: the hub user must not be empty")
        return {object_id.lower(): user_id for object_id, user_id in users.items()}  # as Teams sends them
