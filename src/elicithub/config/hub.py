"""How the hub itself runs: its store, model, question deadlines, conversations' retention, limits, shutdown,
metrics and master key."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from elicithub.config.base import Strict


class StoreConfig(Strict):
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


class ModelConfig(Strict):
    """v1's form of `model:`: the deterministic scripted model, or an OpenAI-compatible endpoint (`models:` names
    real models by id instead)."""

    kind: Literal["scripted", "openai"] = "scripted"
    """`scripted` (`/call SERVER.TOOL {json}` calls a tool; anything else gets help) or `openai`."""
    base_url: str | None = None
    """openai: the endpoint's base URL (the OpenAI API when unset)."""
    model: str | None = None
    """openai: the model's name (required); also the `model` label of its metrics."""
    api_key_env: str | None = None
    """openai: the environment variable holding the API key."""

    @model_validator(mode="after")
    def _openai_needs_a_model(self) -> ModelConfig:
        if self.kind == "openai" and not self.model:
            raise ValueError("model: is required when kind is openai")
        return self


class ElicitationConfig(Strict):
    """How long a question waits for its answer, and how many rounds of questions one tool call may ask."""

    timeout_s: float = Field(default=600, gt=0)
    """A question's deadline: then it expires and the tool says nobody answered."""
    max_rounds: int = Field(default=10, ge=1, le=100)
    """Rounds of questions one tool call may ask (InputRequiredResult rounds, a task's or an A2A agent's)."""


ENDED_RETENTION_S = 24 * 3600.0
"""How long an ended question is kept at most, so that a repeated answer still gets its 200 (and a late one its 409 or
410)."""


class ConversationsConfig(Strict):
    """How long the store keeps an idle conversation (its transcript and event log), and how much of its log."""

    retention_s: float = Field(default=7 * 24 * 3600, gt=0)
    """How long an idle conversation is kept (and an MCP or A2A task of the hub's); its ended questions and finished
    runs are kept a day at most, and never longer than this."""
    max_events: int = Field(default=1000, ge=100, le=100_000)
    """How many of a conversation's newest log entries are kept."""

    @property
    def ended_retention_s(self) -> float:
        """How long an ended question, a finished run and an approval's notes of its end are kept: what they hold
        belongs to their conversation, so never longer than it is."""
        return min(ENDED_RETENTION_S, self.retention_s)


class PerUserLimits(Strict):
    """What one person may start: a user by their id, an anonymous caller by their conversation cookie and by their
    address. Counted in the store, so the hubs sharing it hold them together; a key left out is no limit. Answers
    to open questions are never limited."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    """Requests that start a run (a chat message, a tool call, a task's message) in any 60 s; past it, 429."""
    active_runs: int | None = Field(default=None, ge=1)
    """Runs not finished yet (going, or waiting on their questions) at once; past it, 429."""
    pending_questions: int | None = Field(default=None, ge=1)
    """A user's questions waiting for an answer at once; past it, new runs get 429 until some are answered."""


class LimitsConfig(Strict):
    """What the hub takes from a caller, and how much it holds at once; all off but `max_body_bytes` by default."""

    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    """Larger request bodies get 413."""
    per_user: PerUserLimits = Field(default_factory=PerUserLimits)
    """What each person may start (429 `rate_limited` with `Retry-After` past it)."""
    max_active_runs: int | None = Field(default=None, ge=1)
    """Runs this hub holds at once (going, or parked on their questions); past it, new runs get 503 `overloaded`
    with `Retry-After` at once, while the runs it holds go on."""


class ServerConfig(Strict):
    """How the process stops: on SIGTERM it turns not-ready, serves `drain_s` more seconds, then ends its streams;
    and which proxies in front of it say who the client is."""

    drain_s: float = Field(default=10, ge=0, le=3600)
    """Seconds a hub stays not-ready but serving after SIGTERM; give the orchestrator `drain_s + 5` to stop it."""
    trusted_proxies: list[str] = Field(default_factory=list)
    """Addresses or networks (CIDR) of the proxies in front of the hub: from them, the client's address is taken
    from `X-Forwarded-For` (for the limits of anonymous callers); from anyone else, it is the connection's."""

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, proxies: list[str]) -> list[str]:
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(f"{proxy!r} is not an IP address or network (CIDR)") from None
        return proxies


class MetricsConfig(Strict):
    """`GET /metrics` in Prometheus text format; off, the hub serves no such page and counts nothing for it."""

    enabled: bool = True
    """Whether the hub serves `/metrics` (off: a 404)."""


class SecretsConfig(Strict):
    """Where the hub's master key comes from: the environment, else a file generated on first run (mode 0600)."""

    key_env: str = "ELICITHUB_SECRET_KEY"
    """The environment variable holding the key: base64url of 32 random bytes."""
    key_file: str = ".elicithub/secret.key"
    """The file holding it, when the variable is unset."""
