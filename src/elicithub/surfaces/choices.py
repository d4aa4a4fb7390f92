"""The choices of a flat schema's choice field, as every surface that builds a form reads them: their values and the
titles people see, in the schema's order."""

from __future__ import annotations

from typing import Any


def titled_choices(prop: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """The values and titles of a choice field (its items' for an array: a multi-select), or None for a free field.
    `oneOf`/`anyOf` of consts with titles, or `enum` with the legacy `enumNames`."""
    source = prop.get("items") if prop.get("type") == "array" else prop
    if not isinstance(source, dict):
        return None
    for key in ("oneOf", "anyOf"):
        if isinstance(source.get(key), list):
            consts = [o for o in source[key] if isinstance(o, dict) and "const" in o]
            return [str(o["const"]) for o in consts], [str(o.get("title") or o["const"]) for o in consts]
    if isinstance(source.get("enum"), list):
        values = [str(v) for v in source["enum"]]
        names = source.get("enumNames")
        titles = [str(n) for n in names] if isinstance(names, list) and len(names) == len(values) else values
        return values, titles
    return None
