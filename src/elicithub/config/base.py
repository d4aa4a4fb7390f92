"""The base of every config section: unknown keys are errors, values are frozen, field docstrings describe them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    # A field's docstring is its description: the docs' configuration reference is generated from them.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
