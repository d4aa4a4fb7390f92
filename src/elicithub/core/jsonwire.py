"""JSON as the hub writes it on a wire: compact, and never a bare NaN or Infinity (which browsers cannot parse)."""

from __future__ import annotations

import json
from typing import Any


class NonFinite(ValueError):
    """A number that JSON cannot carry (NaN, Infinity)."""


def dumps(value: Any, *, compact: bool = True) -> str:
    """`compact=False` keeps json.dumps' usual separators, which the OpenAI surface's event text has always had."""
    return json.dumps(value, separators=(",", ":") if compact else None, allow_nan=False)


def _refuse(token: str) -> Any:
    raise NonFinite(f"{token} is not a number JSON can carry")


def loads(text: str) -> Any:
    """Parse JSON, refusing NaN and Infinity."""
    return json.loads(text, parse_constant=_refuse)


def whole_numbers(value: Any) -> Any:
    """Numbers that crossed a protobuf `Value` (A2A data parts) are doubles: 3.0 is taken back as the 3 it was."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value
