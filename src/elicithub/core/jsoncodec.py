"""JSON as the hub reads and writes it on a wire: compact, and never a number that JSON cannot carry."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import orjson

from elicithub.errors import HubError

JsonObject = dict[str, Any]
JsonMapping = Mapping[str, Any]
"""A JSON object only read: any mapping (a TypedDict's value too), taken without a copy."""
"""Free-form JSON, kept as it came: a tool's arguments, a person's answer, a schema, a payload passed through, or JSON
read back before its shape is known (a stored event of any version, another hop's event). The JSON the hub writes in
a shape of its own has a TypedDict that names it, which mypy checks key by key: events (core/events.py) and the
parts and chunks the chat streams write them in (surfaces/chat), elicitations and approvals as stored, tool calls and
pause states (core/runs.py, triggers/mcp/pauses.py), inbox items and entries (runtime/inbox.py), MCP tasks
(protocol/mcp_tasks.py, surfaces/mcp/task_records.py) and audit records (runtime/audit.py)."""


class BadNumber(HubError, ValueError):
    """A number that JSON cannot carry (NaN, Infinity, a literal that overflows to infinity) or that is too long to
    read (an integer past Python's digit limit). Also a ValueError: `loads` stands in for `json.loads`, and a
    caller may catch bad text and bad numbers alike as one."""


def dumps(value: Any, *, compact: bool = True) -> str:
    """`compact=False` keeps json.dumps' usual separators, which the OpenAI surface's event text has always had."""
    return json.dumps(value, separators=(",", ":") if compact else None, allow_nan=False)


def dumps_event(value: Any) -> str:
    """Compact JSON for a stream's event frame, by orjson (several times faster than `dumps`): the same JSON, with
    text past ASCII as UTF-8 rather than `\\u` escapes. What orjson refuses (a lone surrogate, an integer past 64
    bits, a key that is not a string) goes through `dumps`. NaN and the infinities, which the hub refuses where
    they enter (`loads`), orjson would write as null rather than fail mid-stream."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return dumps(value)


def _refuse_constant(token: str) -> Any:
    raise BadNumber(f"{token} is not a number JSON can carry")


def _finite(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        # Browsers and json.dumps(allow_nan=False) would fail on it later, mid-stream: refuse it where it enters.
        raise BadNumber(f"{_shown(literal)} overflows to infinity, which JSON cannot carry")
    return number


def _integer(literal: str) -> int:
    try:
        return int(literal)
    except ValueError:  # past sys.get_int_max_str_digits()
        raise BadNumber(f"an integer of {len(literal.lstrip('-'))} digits is too long to read") from None


def _shown(literal: str) -> str:
    return literal if len(literal) <= 40 else f"{literal[:20]}...{literal[-10:]}"


def loads(text: str | bytes) -> Any:
    """Parse JSON, refusing (BadNumber) NaN, Infinity, literals that overflow and integers too long to read."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite, parse_int=_integer)


def whole_numbers(value: Any) -> Any:
    """Numbers that crossed a protobuf `Value` (A2A data parts) are doubles: 3.0 is taken back as the 3 it was."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


def as_object(value: JsonMapping) -> JsonObject:
    """A mapping as the dict it almost always is (a TypedDict's value is one): no copy unless it is not a dict."""
    return value if isinstance(value, dict) else dict(value)
