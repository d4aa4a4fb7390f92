"""The `models:` section: the providers' models the agents run on, each named once by an id."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from elicithub.config.base import Strict

Provider = Literal["openai", "anthropic", "google", "openai-compatible"]


class ModelSettingsConfig(Strict):
    """What each request to the model passes on (pydantic-ai's `ModelSettings`): a key not listed here is an error, one
    the provider has no use for is ignored."""

    max_tokens: int | None = Field(default=None, gt=0)
    """The most tokens one answer may have; what a request sends fits `context_tokens` less this."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """How random the answer is: 0 the most predictable."""
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Sample only from the likeliest tokens whose probabilities add up to this."""
    top_k: int | None = Field(default=None, gt=0)
    """Sample only from this many of the likeliest tokens (Anthropic, Gemini)."""
    seed: int | None = None
    """The same seed and request give the same answer, where the provider can (OpenAI, Gemini, Ollama)."""
    stop_sequences: list[str] | None = None
    """The answer ends before any of these."""
    parallel_tool_calls: bool | None = None
    """Whether the model may call several tools in one turn (OpenAI, Anthropic)."""
    presence_penalty: float | None = None
    """Holds the model back from tokens it has used at all (OpenAI, Gemini)."""
    frequency_penalty: float | None = None
    """Holds the model back from tokens by how often it has used them (OpenAI, Gemini)."""
    thinking: bool | Literal["minimal", "low", "medium", "high", "xhigh"] | None = None
    """Ask the model to think before it answers (where the provider can): true, or how much."""
    extra_headers: dict[str, str] | None = None
    """HTTP headers added to every request (a gateway's, say)."""
    extra_body: dict[str, object] | None = None
    """Fields added to every request's JSON body, for a server's own options."""


class ModelEntry(Strict):
    """One provider's model, as `models:` names it."""

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")
    """What agents and `model:` call it; also the `model` label of its metrics."""
    provider: Provider
    """openai (chat completions), anthropic (Messages), google (Gemini), or openai-compatible (Ollama, vLLM, a
    LiteLLM proxy, Azure's OpenAI endpoint)."""
    model: str = Field(min_length=1)
    """The provider's name for the model."""
    base_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    """Where the provider's API is (Ollama: `http://127.0.0.1:11434/v1`); required for openai-compatible; unset,
    the provider's own."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable holding the API key (the config never holds the key itself); optional for
    openai-compatible."""
    settings: ModelSettingsConfig = ModelSettingsConfig()
    context_tokens: int | None = Field(default=None, gt=0)
    """The model's context window: what a request sends fits it, less `settings.max_tokens`; unset: 128000."""
    timeout_s: float = Field(default=120, gt=0)
    """How long one request may take, from its start to its answer's last byte; past it the run ends with an
    error (not retried)."""
    max_retries: int = Field(default=4, ge=0, le=10)
    """Retries of a request that failed before its first token (408, 409, 429, 5xx, 529, a lost connection), with
    backoff, honouring `Retry-After` up to 60 s."""

    @model_validator(mode="after")
    def _compatible_needs_a_base_url(self) -> ModelEntry:
        if self.provider == "openai-compatible" and self.base_url is None:
            raise ValueError("base_url: is required when provider is openai-compatible")
        if self.provider != "openai-compatible" and self.api_key_env is None:
            raise ValueError(f"api_key_env: is required when provider is {self.provider}")
        return self
