"""Validation of MCP 2025-11-25 elicitation `requestedSchema` definitions and of the answers given to them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit

from elicithub.core.jsoncodec import JsonObject
from elicithub.errors import HubError

__all__ = ["FieldError", "SchemaError", "apply_defaults", "validate_content", "validate_requested_schema"]

# The SDK's pydantic models for primitive schema definitions (mcp_types._v2025_11_25) are deliberately not used:
# they live in a private package, coerce in lax mode ("5" passes as minLength), ignore unknown keys (so nested
# objects and $ref slip through) and check no cross-field rules (bounds order, defaults, duplicate choices).
# Keywords set to null count as absent everywhere: SDK models dumped without exclude_none produce them.

_PROPERTY_TYPES = ("string", "number", "integer", "boolean", "array")
_EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(?:\.[^@\s.]+)+")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# datetime.fromisoformat alone is too lenient for RFC 3339 (it accepts a missing offset, week dates, "20240101").
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"  # date, time, optional fraction
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"  # RFC 3339 requires an offset
)
_FORMAT_MESSAGES = {
    "email": "must be a valid email address",
    "uri": "must be a valid URI",
    "date": "must be a valid date (YYYY-MM-DD)",
    "date-time": "must be a valid date-time with a timezone (e.g. 2025-01-31T09:00:00Z)",
}


class SchemaError(HubError, ValueError):
    """requestedSchema is not a valid flat elicitation schema.

    The message names the offending property, e.g. "property 'address': nested objects are not allowed". Also a
    ValueError, as it always was: code that checks a schema like any other value (`except ValueError`) still works.
    """


@dataclass(frozen=True)
class FieldError:
    """One problem with a submitted answer; `field` is "" when the problem concerns the content object itself."""

    field: str
    message: str


class _Invalid(SchemaError):
    """Raised by property checks; validate_requested_schema prefixes the property name."""


def validate_requested_schema(schema: Mapping[str, Any]) -> None:
    """Raise SchemaError unless `schema` is a flat elicitation schema as defined by MCP 2025-11-25."""
    if not isinstance(schema, Mapping):
        raise SchemaError("requestedSchema must be an object")
    if "$ref" in schema or any(_contains_ref(value) for key, value in schema.items() if key != "properties"):
        raise SchemaError("requestedSchema: $ref is not allowed")
    if schema.get("type") != "object":
        raise SchemaError('requestedSchema: type must be "object"')
    for key in ("title", "description"):
        if schema.get(key) is not None and not isinstance(schema[key], str):
            raise SchemaError(f"requestedSchema: {key} must be a string")
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        raise SchemaError("requestedSchema: properties must be an object")
    for name, prop in properties.items():
        # "" is reserved for FieldError about the whole content object.
        if not isinstance(name, str) or not name:
            raise SchemaError("requestedSchema: property names must be non-empty strings")
        try:
            _check_property(prop)
        except _Invalid as exc:
            raise SchemaError(f"property '{name}': {exc}") from None
    required = schema.get("required")
    if required is None:
        return
    if not isinstance(required, list) or not all(isinstance(entry, str) for entry in required):
        raise SchemaError("requestedSchema: required must be a list of property names")
    seen: set[str] = set()
    for entry in required:
        if entry not in properties:
            raise SchemaError(f"property '{entry}': listed in required but not defined in properties")
        if entry in seen:
            raise SchemaError(f"property '{entry}': listed in required more than once")
        seen.add(entry)


def validate_content(schema: Mapping[str, Any], content: Mapping[str, Any] | None) -> list[FieldError]:
    """Check an answer against a valid schema: [] when valid, else the first problem of each field (None = absent)."""
    if not isinstance(content, Mapping):
        return [FieldError("", "content must be an object")]
    properties = _properties(schema)
    required = schema.get("required")
    required_names = {entry for entry in required if isinstance(entry, str)} if isinstance(required, list) else set()
    errors: list[FieldError] = []
    for name, prop in properties.items():
        value = content.get(name)
        if value is None:
            if name in required_names:
                errors.append(FieldError(name, "is required"))
            continue
        problem = _value_problem(prop, value) if isinstance(prop, Mapping) else None
        if problem is not None:
            errors.append(FieldError(name, problem))
    errors.extend(FieldError(str(key), "is not a field of this form") for key in content if key not in properties)
    return errors


def apply_defaults(schema: Mapping[str, Any], content: Mapping[str, Any] | None = None) -> JsonObject:
    """Return a copy of `content` with schema defaults filled in for absent (or None) properties."""
    result = dict(content) if isinstance(content, Mapping) else {}
    for name, prop in _properties(schema).items():
        default = prop.get("default") if isinstance(prop, Mapping) else None
        if default is not None and result.get(name) is None:
            # Copy lists so that a UI editing the answer cannot mutate the schema.
            result[name] = list(default) if isinstance(default, list) else default
    return result


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def _contains_ref(node: Any) -> bool:
    # Iterative so that deeply nested junk cannot exhaust the recursion limit.
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Mapping):
            if "$ref" in current:
                return True
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


def _check_property(prop: Any) -> None:
    if not isinstance(prop, Mapping):
        raise _Invalid("definition must be an object")
    if _contains_ref(prop):
        raise _Invalid("$ref is not allowed")
    kind = prop.get("type")
    if kind is None:
        raise _Invalid("type is required")
    if kind == "object":
        raise _Invalid("nested objects are not allowed")
    if not isinstance(kind, str) or kind not in _PROPERTY_TYPES:
        raise _Invalid(f"unknown type {kind!r} (expected one of: {', '.join(_PROPERTY_TYPES)})")
    for key in ("title", "description"):
        if prop.get(key) is not None and not isinstance(prop[key], str):
            raise _Invalid(f"{key} must be a string")
    if kind == "string":
        _check_string(prop)
    elif kind in ("number", "integer"):
        _check_number(prop, integer=kind == "integer")
    elif kind == "array":
        _check_array(prop)
    default = prop.get("default")
    if default is not None:
        problem = _value_problem(prop, default)
        if problem is not None:
            raise _Invalid(f"default {problem}")


def _check_string(prop: Mapping[str, Any]) -> None:
    enum, one_of = prop.get("enum"), prop.get("oneOf")
    if enum is None and one_of is None:
        if prop.get("enumNames") is not None:
            raise _Invalid("enumNames requires enum")
        _check_size_bounds(prop, "minLength", "maxLength")
        fmt = prop.get("format")
        if fmt is not None and (not isinstance(fmt, str) or fmt not in _FORMAT_MESSAGES):
            raise _Invalid(f"unsupported format {fmt!r} (expected one of: {', '.join(_FORMAT_MESSAGES)})")
        return
    if enum is not None and one_of is not None:
        raise _Invalid("enum and oneOf cannot be combined")
    # A choice field is rendered as a select; text constraints on it would only make options unselectable.
    for key in ("minLength", "maxLength", "format"):
        if prop.get(key) is not None:
            raise _Invalid(f"{key} cannot be combined with a list of choices")
    if one_of is not None:
        _check_titled_choices(one_of, "oneOf")
        return
    values = _check_choices(enum, "enum")
    names = prop.get("enumNames")
    if names is not None and (
        not isinstance(names, list) or len(names) != len(values) or not all(isinstance(n, str) for n in names)
    ):
        raise _Invalid("enumNames must be a list of strings, one for each enum value")


def _check_number(prop: Mapping[str, Any], *, integer: bool) -> None:
    for key in ("minimum", "maximum"):
        if prop.get(key) is not None and not _is_number(prop[key]):
            raise _Invalid(f"{key} must be a finite number")
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None:
        if low > high:
            raise _Invalid("minimum must not be greater than maximum")
        if integer and math.ceil(low) > math.floor(high):
            raise _Invalid("no integer lies between minimum and maximum")


def _check_array(prop: Mapping[str, Any]) -> None:
    items = prop.get("items")
    if not isinstance(items, Mapping):
        raise _Invalid("array items must be an enum of strings")
    if items.get("anyOf") is not None:
        if items.get("type") not in (None, "string") or items.get("enum") is not None:
            raise _Invalid('array items with anyOf may only add type "string"')
        options = _check_titled_choices(items["anyOf"], "items.anyOf")
    elif items.get("type") == "string" and items.get("enum") is not None:
        options = _check_choices(items["enum"], "items.enum")
    else:
        raise _Invalid("array items must be an enum of strings")
    low, _ = _check_size_bounds(prop, "minItems", "maxItems")
    # Duplicates are forbidden, so more required items than options could never be satisfied.
    if low is not None and low > len(options):
        raise _Invalid("minItems is greater than the number of choices")


def _check_choices(values: Any, key: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise _Invalid(f"{key} must be a list of strings")
    if not values:
        raise _Invalid(f"{key} must not be empty")
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise _Invalid(f"{key} lists '{value}' more than once")
        seen.add(value)
    return values


def _check_titled_choices(options: Any, key: str) -> list[str]:
    if not isinstance(options, list):
        raise _Invalid(f"{key} must be a list of {{const, title}} objects")
    consts = [o.get("const") if isinstance(o, Mapping) and isinstance(o.get("title"), str) else None for o in options]
    if not all(isinstance(const, str) for const in consts):
        raise _Invalid(f"{key} entries must have a string const and a string title")
    return _check_choices(consts, key)


def _check_size_bounds(prop: Mapping[str, Any], low_key: str, high_key: str) -> tuple[int | None, int | None]:
    bounds: list[int | None] = []
    for key in (low_key, high_key):
        bound = prop.get(key)
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
            raise _Invalid(f"{key} must be a non-negative integer")
        bounds.append(bound)
    low, high = bounds
    if low is not None and high is not None and low > high:
        raise _Invalid(f"{low_key} must not be greater than {high_key}")
    return low, high


def _is_number(value: Any) -> bool:
    # bool is an int subclass but never a JSON number; ints skip isfinite, which overflows on huge ints.
    return not isinstance(value, bool) and (
        isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    )


def _choices(prop: Mapping[str, Any]) -> list[str] | None:
    source = prop.get("items") if prop.get("type") == "array" else prop
    if not isinstance(source, Mapping):
        return None
    if isinstance(source.get("enum"), list):
        return [str(value) for value in source["enum"]]
    for key in ("oneOf", "anyOf"):
        if isinstance(source.get(key), list):
            return [str(option.get("const")) for option in source[key] if isinstance(option, Mapping)]
    return None


def _value_problem(prop: Mapping[str, Any], value: Any) -> str | None:
    """Return why a non-None value does not fit a valid property definition, or None if it fits."""
    kind = prop.get("type")
    if kind == "string":
        return _string_problem(prop, value)
    if kind in ("number", "integer"):
        return _number_problem(prop, value, integer=kind == "integer")
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be a boolean"
    if kind == "array":
        return _array_problem(prop, value)
    return None


def _string_problem(prop: Mapping[str, Any], value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    choices = _choices(prop)
    if choices is not None:
        return None if value in choices else f"must be one of: {', '.join(choices)}"
    low, high = prop.get("minLength"), prop.get("maxLength")
    if isinstance(low, int) and len(value) < low:
        return f"must be at least {_count(low, 'character')}"
    if isinstance(high, int) and len(value) > high:
        return f"must be at most {_count(high, 'character')}"
    fmt = prop.get("format")
    if isinstance(fmt, str) and fmt in _FORMAT_MESSAGES and not _matches_format(fmt, value):
        return _FORMAT_MESSAGES[fmt]
    return None


def _matches_format(fmt: str, value: str) -> bool:
    if fmt == "email":
        return _EMAIL.fullmatch(value) is not None
    if fmt == "uri":
        if not value or any(ch.isspace() or not ch.isprintable() for ch in value):
            return False
        try:
            parts = urlsplit(value)
        except ValueError:
            return False
        return bool(parts.scheme) and bool(parts.netloc or parts.path)
    # The shape regexes only admit ASCII digits; parsing then rejects impossible values such as 2025-02-30.
    try:
        if fmt == "date":
            if _DATE.fullmatch(value) is None:
                return False
            date.fromisoformat(value)
        elif fmt == "date-time":
            if _DATE_TIME.fullmatch(value) is None:
                return False
            datetime.fromisoformat(value[:-1] + "+00:00" if value[-1] in "Zz" else value)
    except ValueError:
        return False
    return True


def _number_problem(prop: Mapping[str, Any], value: Any, *, integer: bool) -> str | None:
    type_message = "must be an integer" if integer else "must be a number"
    if not _is_number(value) or (integer and isinstance(value, float) and not value.is_integer()):
        return type_message
    low, high = prop.get("minimum"), prop.get("maximum")
    if _is_number(low) and value < low:
        return f"must be at least {_format_number(low)}"
    if _is_number(high) and value > high:
        return f"must be at most {_format_number(high)}"
    return None


def _array_problem(prop: Mapping[str, Any], value: Any) -> str | None:
    if not isinstance(value, list):
        return "must be a list"
    if not all(isinstance(item, str) for item in value):
        return "must be a list of strings"
    choices = _choices(prop) or []
    if any(item not in choices for item in value):
        return f"must only contain values from: {', '.join(choices)}"
    if len(set(value)) != len(value):
        return "must not contain duplicates"
    low, high = prop.get("minItems"), prop.get("maxItems")
    if isinstance(low, int) and len(value) < low:
        return f"must have at least {_count(low, 'item')}"
    if isinstance(high, int) and len(value) > high:
        return f"must have at most {_count(high, 'item')}"
    return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _format_number(number: Any) -> str:
    # Show 10.0 as "10" so messages read naturally; keep repr for fractions and huge floats.
    if isinstance(number, float) and number.is_integer() and abs(number) < 2**53:
        return str(int(number))
    return repr(number)
