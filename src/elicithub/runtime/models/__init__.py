"""Models behind one seam: the scripted model and the providers."""

from __future__ import annotations

from elicithub.config import ModelConfig
from elicithub.runtime.models.scripted import ScriptedModel
from elicithub.runtime.models.seam import Model, ModelTurn, ToolSpec, callable_name

__all__ = ["Model", "ModelTurn", "ScriptedModel", "ToolSpec", "callable_name", "create_model"]


def create_model(config: ModelConfig) -> Model:
    return ScriptedModel() if config.kind == "scripted" else _openai(config)


def _openai(config: ModelConfig) -> Model:
    from elicithub.runtime.models.openai_chat import OpenAIModel

    return OpenAIModel(config)
