"""The page's form without JavaScript, from a flat schema: a control per kind of field, defaults and submitted values
filled in, errors beside their field, everything escaped; and a posted form read back as the answer's content."""

from __future__ import annotations

from typing import Any

from elicithub.core.schema import FieldError, validate_content
from elicithub.surfaces.email.forms import content_of, fields

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name <b>", "minLength": 2, "default": 'o"k'},
        "notes": {"type": "string", "maxLength": 1000, "description": "Anything else"},
        "count": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3},
        "ratio": {"type": "number"},
        "urgent": {"type": "boolean", "default": True},
        "size": {"type": "string", "enum": ["s", "m", "l"]},
        "region": {"type": "string", "oneOf": [{"const": "eu", "title": "Europe"}, {"const": "us", "title": "US"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "default": ["b"]},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "mail": {"type": "string", "format": "email"},
    },
    "required": ["name", "size"],
}


def test_each_kind_of_field_has_its_control_with_its_default() -> None:
    html = fields(SCHEMA)
    assert '<label class="label" for="f0">Name &lt;b&gt; <span class="required">*</span></label>' in html
    assert 'name="name" value="o&quot;k" required minlength="2">' in html
    assert '<textarea id="f1" name="notes" maxlength="1000"></textarea><p class="hint">Anything else</p>' in html
    assert 'type="number" id="f2" name="count" value="3" step="1" min="1" max="9"' in html
    assert 'type="number" id="f3" name="ratio" step="any"' in html
    assert 'type="checkbox" id="f4" name="urgent" value="true" checked' in html
    assert '<select id="f5" name="size" required><option value="">Choose…</option><option value="s">s</option>' in html
    assert '<option value="eu">Europe</option><option value="us">US</option>' in html
    assert 'name="tags" value="a">' in html and 'name="tags" value="b" checked>' in html
    assert 'type="date" id="f8" name="day"' in html
    assert 'type="datetime-local" id="f9" name="at"' in html and "UTC" in html
    assert 'type="email" id="f10" name="mail"' in html


def test_a_refused_form_shows_what_was_submitted_and_each_error_beside_its_field() -> None:
    submitted = {"name": ["x"], "count": ["12"], "tags": ["a", "c"]}
    errors = [FieldError("count", "must be at most 9"), FieldError("", "something about the whole answer")]
    html = fields(SCHEMA, submitted, errors)
    assert 'name="count" value="12"' in html and '<p class="error" role="alert">must be at most 9</p>' in html
    assert html.startswith('<p class="error" role="alert">something about the whole answer</p>')
    assert 'name="urgent" value="true">' in html  # unticked: it was not submitted
    assert 'value="a" checked' in html and 'value="b">' in html and 'value="c" checked' in html


def test_a_posted_form_is_read_by_each_fields_kind() -> None:
    posted = {
        "name": ["orders"],
        "notes": [""],
        "count": ["4"],
        "ratio": ["0.5"],
        "size": ["m"],
        "region": ["eu"],
        "tags": ["a", "c"],
        "day": ["2026-12-01"],
        "at": ["2026-12-01T09:30"],
        "mail": [""],
    }
    content = content_of(SCHEMA, posted)
    assert content == {
        "name": "orders",
        "count": 4,
        "ratio": 0.5,
        "urgent": False,
        "size": "m",
        "region": "eu",
        "tags": ["a", "c"],
        "day": "2026-12-01",
        "at": "2026-12-01T09:30:00Z",
    }
    assert validate_content(SCHEMA, content) == []
    wrong = content_of(SCHEMA, {"name": ["orders"], "size": ["m"], "count": ["many"]})
    assert wrong["count"] == "many"  # left as typed, for the schema's check to name
    assert [e.field for e in validate_content(SCHEMA, wrong)] == ["count"]
