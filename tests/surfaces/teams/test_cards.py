"""Question cards built from flat schemas, field kind by field kind, and read back from what Action.Execute sends
(every input's value as a string): titled and multi choices (by position when a value holds a comma), numbers,
integers, booleans, dates and date-times, text formats, defaults and required marks; errors under their fields."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from elicithub.core.schema import FieldError, validate_content
from elicithub.surfaces.teams import approval_cards, cards
from tests.core_fixtures import question

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "maxLength": 40, "default": "orders"},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "site": {"type": "string", "title": "Site", "format": "uri"},
        "day": {"type": "string", "title": "Day", "format": "date", "default": "2026-12-01"},
        "at": {"type": "string", "title": "At", "format": "date-time", "default": "2026-12-01T09:30:00Z"},
        "size": {"type": "number", "title": "Size", "minimum": 0.5, "maximum": 8},
        "count": {"type": "integer", "title": "Count", "default": 3},
        "sure": {"type": "boolean", "title": "Sure", "default": True},
        "tier": {
            "type": "string",
            "title": "Tier",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "tags": {"type": "array", "title": "Tags", "items": {"type": "string", "enum": ["a,b", "c"]}, "default": ["c"]},
    },
    "required": ["name", "day", "tier", "sure"],
}


def inputs(card: cards.AdaptiveCard) -> dict[str, dict[str, Any]]:
    body = cards.card_json(card)["body"]
    return {e["id"]: e for e in body if str(e["type"]).startswith("Input.")}


def test_each_field_kind_is_its_input_with_its_default_and_required_mark() -> None:
    found = inputs(cards.question_card("e1", "Set it up?", SCHEMA, "Alice"))
    assert [(k, v["type"]) for k, v in found.items()] == [
        ("q0", "Input.Text"),
        ("q1", "Input.Text"),
        ("q2", "Input.Text"),
        ("q3", "Input.Date"),
        ("q4", "Input.Date"),
        ("q4.time", "Input.Time"),
        ("q5", "Input.Number"),
        ("q6", "Input.Number"),
        ("q7", "Input.Toggle"),
        ("q8", "Input.ChoiceSet"),
        ("q9", "Input.ChoiceSet"),
    ]
    assert (found["q0"]["value"], found["q0"]["maxLength"], found["q0"]["isRequired"]) == ("orders", 40, True)
    assert (found["q1"]["style"], found["q2"]["style"]) == ("Email", "Url")
    assert found["q3"]["value"] == "2026-12-01" and found["q3"]["isRequired"] is True
    assert (found["q4"]["label"], found["q4"]["value"], found["q4.time"]["value"]) == (
        "At (UTC)",
        "2026-12-01",
        "09:30",
    )
    assert (found["q5"]["min"], found["q5"]["max"], found["q6"]["value"]) == (0.5, 8, 3)
    assert found["q7"]["value"] == "true" and "isRequired" not in found["q7"]  # a toggle always answers
    assert [(c["title"], c["value"]) for c in found["q8"]["choices"]] == [("Small", "s"), ("Large", "l")]
    # "a,b" cannot travel in a multi-select's comma-joined answer: its choices carry their positions.
    assert [c["value"] for c in found["q9"]["choices"]] == ["0", "1"] and found["q9"]["value"] == "1"


def test_what_execute_sends_reads_back_as_content_that_fits_the_schema() -> None:
    sent = {
        "q0": "ledger",
        "q1": "ops@acme.example",
        "q2": "",
        "q3": "2026-12-24",
        "q4": "2026-12-24",
        "q4.time": "18:05",
        "q5": "2.5",
        "q6": "4",
        "q7": "false",
        "q8": "l",
        "q9": "0,1",
        "elicitationId": "e1",
    }
    content = cards.content_of(SCHEMA, sent)
    assert content == {
        "name": "ledger",
        "email": "ops@acme.example",
        "day": "2026-12-24",
        "at": "2026-12-24T18:05:00Z",
        "size": 2.5,
        "count": 4,
        "sure": False,
        "tier": "l",
        "tags": ["a,b", "c"],
    }
    assert validate_content(SCHEMA, content) == []


def test_errors_go_under_their_fields_and_the_card_keeps_what_was_sent() -> None:
    errors = cards.field_errors(SCHEMA, [FieldError("count", "must be an integer"), FieldError("", "too much")])
    assert errors == {"q6": "must be an integer", "": "too much"}
    card = cards.card_json(cards.question_card("e1", "Set it up?", SCHEMA, "Alice", None, {"q6": "4.5"}, errors))
    texts = [e.get("text") for e in card["body"] if e["type"] == "TextBlock"]
    assert "must be an integer" in texts and "too much" in texts
    assert next(e for e in card["body"] if e.get("id") == "q6")["value"] == 4.5


def test_a_form_past_what_a_card_holds_is_answered_in_the_browser() -> None:
    many = {"type": "object", "properties": {f"f{i}": {"type": "string", "title": "x" * 200} for i in range(200)}}
    card = cards.question_card("e1", "Many?", many, "Alice")
    assert not cards.fits(card) and cards.fits(cards.question_card("e1", "Few?", SCHEMA, "Alice"))
    widget = cards.card_json(cards.widget_card("e1", "Many?", "Alice", "https://hub.example/?conversation=c1"))
    assert [a["type"] for a in widget["actions"]] == ["Action.OpenUrl", "Action.Execute", "Action.Execute"]


def test_an_answer_shows_by_titles_on_the_ended_card() -> None:
    facts = cards.answered_facts(SCHEMA, {"tier": "l", "tags": ["a,b"], "sure": True, "count": 2})
    assert facts == [("Count", "2"), ("Sure", "Yes"), ("Tier", "Large"), ("Tags", "a,b")]


def test_an_approval_card_shows_long_arguments_shortened_visibly() -> None:
    asked = question(context={"serverId": "ops", "toolName": "load", "arguments": {"blob": "x" * 50_000}})
    asked = replace(asked, message="alice asks to call ops.load. Approve this call?")
    card = approval_cards.approval_card(asked, "group ops")
    shown = [e["text"] for e in cards.card_json(card)["body"] if e["type"] == "TextBlock" and '"blob"' in e["text"]]
    assert len(shown[0]) == approval_cards.ARGUMENTS_MAX and shown[0].endswith("…") and cards.fits(card)
