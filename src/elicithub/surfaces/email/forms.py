"""Forms without JavaScript, from a flat elicitation schema: an HTML control per field (its default, or what was
submitted, filled in; its error beside it), and what a submitted form's fields are as an answer's content."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from elicithub.core.schema import FieldError

Submitted = Mapping[str, list[str]]
"""A form as posted: each field's values (a multi-select sends one per choice)."""


def _properties(schema: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(str(n), p) for n, p in (schema.get("properties") or {}).items() if isinstance(p, dict)]


def _choices(prop: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """A choice field's (value, title) pairs; None for a field without choices."""
    source = prop.get("items") if prop.get("type") == "array" else prop
    if not isinstance(source, Mapping):
        return None
    if isinstance(source.get("enum"), list):
        names = source.get("enumNames") if isinstance(source.get("enumNames"), list) else None
        values = [str(v) for v in source["enum"]]
        return [(v, str(names[i]) if names and i < len(names) else v) for i, v in enumerate(values)]
    for key in ("oneOf", "anyOf"):
        if isinstance(source.get(key), list):
            return [(str(o.get("const")), str(o.get("title") or o.get("const"))) for o in source[key]]
    return None


def _shown(prop: Mapping[str, Any], submitted: Submitted | None, name: str) -> list[str]:
    """The values a control shows: what was submitted, else the field's default."""
    if submitted is not None:
        return list(submitted.get(name, []))
    default = prop.get("default")
    if default is None:
        return []
    if isinstance(default, bool):
        return ["true"] if default else []
    if isinstance(default, list):
        return [str(v) for v in default]
    if isinstance(default, float) and default.is_integer():
        return [str(int(default))]
    return [str(default)]


def _control(name: str, prop: dict[str, Any], values: list[str], required: bool, field_id: str) -> str:
    kind, choices = prop.get("type"), _choices(prop)
    need = " required" if required else ""
    if kind == "boolean":
        checked = " checked" if values else ""
        return f'<input type="checkbox" id="{field_id}" name="{escape(name)}" value="true"{checked}>'
    if kind == "array":
        boxes = "".join(
            f'<label class="choice"><input type="checkbox" name="{escape(name)}" value="{escape(v)}"'
            f"{' checked' if v in values else ''}> {escape(t)}</label>"
            for v, t in choices or []
        )
        return f'<span id="{field_id}" class="choices">{boxes}</span>'
    if choices is not None:
        blank = "" if required and values else '<option value="">Choose…</option>'
        options = "".join(
            f'<option value="{escape(v)}"{" selected" if v in values else ""}>{escape(t)}</option>' for v, t in choices
        )
        return f'<select id="{field_id}" name="{escape(name)}"{need}>{blank}{options}</select>'
    value = f' value="{escape(values[0])}"' if values else ""
    attributes = need
    if kind in ("number", "integer"):
        attributes += f' step="{1 if kind == "integer" else "any"}"'
        for key in ("minimum", "maximum"):
            if isinstance(prop.get(key), int | float):
                attributes += f' {key[:3]}="{prop[key]}"'
        return f'<input type="number" id="{field_id}" name="{escape(name)}"{value}{attributes}>'
    for key, attribute in (("minLength", "minlength"), ("maxLength", "maxlength")):
        if isinstance(prop.get(key), int):
            attributes += f' {attribute}="{prop[key]}"'
    if prop.get("format") == "date-time":
        shown = f' value="{escape(values[0][:16])}"' if values else ""
        return f'<input type="datetime-local" id="{field_id}" name="{escape(name)}"{shown}{need}> <span>UTC</span>'
    kinds = {"email": "email", "uri": "url", "date": "date"}
    input_type = kinds.get(str(prop.get("format")), "text")
    if input_type == "text" and isinstance(prop.get("maxLength"), int) and prop["maxLength"] > 200:
        text = escape(values[0] if values else "")
        return f'<textarea id="{field_id}" name="{escape(name)}"{attributes}>{text}</textarea>'
    return f'<input type="{input_type}" id="{field_id}" name="{escape(name)}"{value}{attributes}>'


def fields(schema: Mapping[str, Any], submitted: Submitted | None = None, errors: Sequence[FieldError] = ()) -> str:
    """The controls of every field of `schema`, labelled, each with its description and its error."""
    required = set(schema.get("required") or [])
    wrong = {e.field: e.message for e in errors}
    rows = []
    for position, (name, prop) in enumerate(_properties(schema)):
        field_id = f"f{position}"
        label = escape(str(prop.get("title") or name)) + (
            ' <span class="required">*</span>' if name in required else ""
        )
        control = _control(name, prop, _shown(prop, submitted, name), name in required, field_id)
        hint = f'<p class="hint">{escape(str(prop["description"]))}</p>' if prop.get("description") else ""
        error = f'<p class="error" role="alert">{escape(wrong[name])}</p>' if name in wrong else ""
        tag = "span" if prop.get("type") == "array" else "label"
        attribute = "" if tag == "span" else f' for="{field_id}"'
        rows.append(f'<div class="field"><{tag} class="label"{attribute}>{label}</{tag}>{control}{hint}{error}</div>')
    general = [escape(e.message) for e in errors if e.field not in dict(_properties(schema))]
    problem = f'<p class="error" role="alert">{"; ".join(general)}</p>' if general else ""
    return problem + "".join(rows)


def content_of(schema: Mapping[str, Any], submitted: Submitted) -> dict[str, Any]:
    """The answer's content: each field's value as its kind reads it (an empty text is no value; a number that is
    none stays text, for the schema's check to name)."""
    content: dict[str, Any] = {}
    for name, prop in _properties(schema):
        values = [v for v in submitted.get(name, []) if v != ""]
        kind = prop.get("type")
        if kind == "boolean":
            content[name] = bool(values)
        elif kind == "array":
            content[name] = values
        elif not values:
            continue
        elif kind in ("number", "integer"):
            content[name] = _number(values[0])
        elif prop.get("format") == "date-time" and len(values[0]) == 16:
            content[name] = f"{values[0]}:00Z"  # a datetime-local control's minutes, in UTC as the page says
        else:
            content[name] = values[0]
    return content


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text
