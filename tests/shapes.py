"""Checks a JSON value against the TypedDict that names its shape, at run time: mypy checks the code that builds it,
these check that the value built is the one the shape says (the keys, and a `type` or `kind` literal)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Required, get_args, get_origin, get_type_hints


def keys_of(shape: type) -> tuple[set[str], set[str]]:
    """The shape's required and optional keys, read from its annotations: Python 3.11 cannot tell them apart at run
    time in a module whose annotations are postponed (`from __future__ import annotations`)."""
    required: set[str] = set()
    optional: set[str] = set()
    for key, hint in get_type_hints(shape, include_extras=True).items():
        origin = get_origin(hint)
        total = getattr(shape, "__total__", True)
        (optional if origin is NotRequired or (not total and origin is not Required) else required).add(key)
    return required, optional


def assert_shaped(value: Mapping[str, Any], shape: type) -> None:
    required, optional = keys_of(shape)
    assert required <= value.keys(), f"{shape.__name__} lacks {required - value.keys()}"
    assert value.keys() <= required | optional, f"{shape.__name__} has no {value.keys() - required - optional}"
    hints = get_type_hints(shape)
    for key in ("type", "kind"):
        if key in hints and get_origin(hints[key]) is Literal:
            assert value[key] in get_args(hints[key]), f"{shape.__name__}: {key} {value[key]!r}"
