"""The terminal prompt on plain values: each field kind, defaults, re-asking with the reason, decline and cancel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from elicithub.clients.prompt import Terminal
from elicithub.core.elicitation import Answer


class Scripted:
    """A person typing `lines` in order; raising an exception instance stands for Ctrl-C or end of input."""

    def __init__(self, *lines: str | BaseException) -> None:
        self.lines: Iterator[str | BaseException] = iter(lines)
        self.shown: list[str] = []

    def read(self, prompt: str) -> str:
        self.shown.append(prompt)
        line = next(self.lines)
        if isinstance(line, BaseException):
            raise line
        return line

    def terminal(self) -> Terminal:
        return Terminal(read=self.read, write=self.shown.append)


def form(
    schema_properties: dict[str, Any], *lines: str | BaseException, required: list[str] | None = None
) -> tuple[Answer, list[str]]:
    person = Scripted(*lines)
    schema = {
        "type": "object",
        "properties": schema_properties,
        "required": list(schema_properties) if required is None else required,
    }
    return person.terminal().form("Question?", schema), person.shown


def test_a_string_with_a_format_is_asked_again_with_the_reason() -> None:
    answer, shown = form({"email": {"type": "string", "format": "email", "title": "Email"}}, "nope", "a@b.example")
    assert answer == Answer("accept", {"email": "a@b.example"})
    assert "  Email (email): " in shown
    assert "    Email must be a valid email address; try again." in shown


def test_numbers_are_parsed_and_kept_in_range() -> None:
    props = {"n": {"type": "number", "minimum": 0.5, "maximum": 2}, "i": {"type": "integer", "minimum": 1}}
    answer, shown = form(props, "inf", "3", "1.5", "2.5", "7")
    assert answer == Answer("accept", {"n": 1.5, "i": 7})
    assert "    n must be a finite number; try again." in shown
    assert "    n must be at most 2; try again." in shown
    assert "    i must be a whole number; try again." in shown
    assert "  i (whole number 1–): " in shown


def test_a_boolean_takes_yes_or_no() -> None:
    answer, shown = form({"ok": {"type": "boolean"}}, "perhaps", "N")
    assert answer == Answer("accept", {"ok": False})
    assert "    ok must be yes or no (y/n); try again." in shown


def test_single_and_multi_select_show_titles_and_take_numbers_values_or_titles() -> None:
    props = {
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 2},
    }
    answer, shown = form(props, "large", "1", "1, c")
    assert answer == Answer("accept", {"size": "l", "tags": ["a", "c"]})
    assert "    1. Small (s)" in shown and "    2. Large (l)" in shown
    assert "    tags must have at least 2 items; try again." in shown


def test_defaults_are_shown_and_kept_on_enter_and_optional_fields_may_stay_empty() -> None:
    props = {
        "replicas": {"type": "integer", "default": 2},
        "notify": {"type": "boolean", "default": True},
        "note": {"type": "string"},
    }
    answer, shown = form(props, "", "", "", required=[])
    assert answer == Answer("accept", {"replicas": 2, "notify": True})
    assert "  replicas (whole number, optional) [default: 2]: " in shown
    assert "  notify (y/n, optional) [default: y]: " in shown


def test_a_required_field_cannot_be_left_empty() -> None:
    answer, shown = form({"name": {"type": "string", "minLength": 2}}, "", "x", "xy")
    assert answer == Answer("accept", {"name": "xy"})
    assert shown.count("    name is required; try again.") == 1
    assert "    name must be at least 2 characters; try again." in shown


@pytest.mark.parametrize(
    ("typed", "action"),
    [("/decline", "decline"), ("/cancel", "cancel"), (KeyboardInterrupt(), "cancel"), (EOFError(), "cancel")],
)
def test_a_question_can_be_declined_or_cancelled(typed: str | BaseException, action: str) -> None:
    answer, _ = form({"a": {"type": "string"}, "b": {"type": "string"}}, "first", typed)
    assert answer == Answer(action)  # type: ignore[arg-type]


def test_a_url_question_shows_the_link_and_waits_for_the_person() -> None:
    person = Scripted("", "/decline")
    terminal = person.terminal()
    assert terminal.url("Sign in", "https://example.com/a") == Answer("accept")
    assert "  Open https://example.com/a" in person.shown
    assert terminal.url("Sign in", "https://example.com/a") == Answer("decline")
