"""Models behind one seam: the scripted model and the providers."""

from __future__ import annotations

from elicithub.config import ModelConfig, ModelEntry
from elicithub.runtime.models.scripted import ScriptedModel
from elicithub.runtime.models.seam import Completing, Model, ModelRequest, ModelTurn, ToolSpec, callable_name
from elicithub.runtime.models.streamed import Meter, ModelFailed, ProviderModel

__all__ = [
    "Completing",
    "Meter",
    "Model",
    "ModelFailed",
    "ModelRequest",
    "ModelTurn",
    "ProviderModel",
    "ScriptedModel",
    "ToolSpec",
    "callable_name",
    "create_model",
]


def create_model(config: ModelConfig | ModelEntry, meter: Meter | None = None) -> Model:
    """The model a config names: a `models:` entry, or v1's `{kind: scripted}` / `{kind: openai, ...}` (an
    OpenAI-compatible endpoint, OpenAI's own when it names no `base_url`)."""
    if isinstance(config, ModelEntry):
        return ProviderModel(config, meter)
    if config.kind == "scripted":
        return ScriptedModel()
    name = config.model or "gpt-4o-mini"
    entry = ModelEntry.model_construct(
        id=name, provider="openai-compatible", model=name, base_url=config.base_url, api_key_env=config.api_key_env
    )
    return ProviderModel(entry, meter)
