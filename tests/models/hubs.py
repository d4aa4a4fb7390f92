"""A hub whose model is a provider's real model (pydantic-ai and the provider's SDK) pointed at the stand-in: the
`model_standin` fixture serves the stand-in and sets the key its config names, `standin_models` is that config."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.models.standins import ModelStandIn

KEY_ENV = "ELICITHUB_TEST_MODEL_KEY"
MODEL_ID = "gpt"
"""What the hub's config calls the model: retries and failures name it (`Model gpt is busy; ...`)."""


@pytest.fixture
def model_standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelStandIn]:
    monkeypatch.setenv(KEY_ENV, "sk-standin")
    with ModelStandIn() as standin:
        yield standin


def standin_models(standin: ModelStandIn, provider: str = "openai") -> dict[str, Any]:
    """The config keys (`models:` and `model:`) of a hub whose model is `provider`'s, served by `standin`."""
    base_url = {"openai": standin.openai_base_url, "anthropic": standin.anthropic_base_url}[provider]
    entry = {"id": MODEL_ID, "provider": provider, "model": "standin-1", "base_url": base_url, "api_key_env": KEY_ENV}
    return {"models": [entry], "model": MODEL_ID}
