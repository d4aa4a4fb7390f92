"""Block Kit from flat schemas and back, with plain values: every field kind, defaults, and errors per block."""

from __future__ import annotations

from typing import Any

from elicithub.core.elicitation import Answer, Invalid, Resolve, State, decide, utcnow
from elicithub.core.schema import FieldError, validate_requested_schema
from elicithub.surfaces.slack.blocks import (
    MODAL_BLOCKS,
    OPEN_LINK,
    content_of,
    ended_message,
    fits_modal,
    form_view,
    modal_errors,
    question_message,
)
from tests.core_fixtures import question
from tests.surfaces.slack.conftest import submission

MANY = [f"option-{i}" for i in range(12)]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "A form with every kind of field in it",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 20, "default": "orders"},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date", "default": "2026-11-24"},
        "at": {"type": "string", "format": "date-time"},
        "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"], "default": "m"},
        "ratio": {"type": "number", "minimum": 0.5, "maximum": 2.5},
        "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2},
        "tags": {"type": "array", "items": {"anyOf": [{"const": v, "title": v.upper()} for v in MANY]}, "maxItems": 3},
        "notify": {"type": "boolean", "default": True},
    },
    "required": ["name", "size", "count"],
}


def elements(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["label"]["text"]: b["element"] for b in view["blocks"] if b["type"] == "input"}


def test_each_field_kind_gets_its_slack_input_with_its_default() -> None:
    validate_requested_schema(SCHEMA)
    view = form_view("eli_1", "Set <it> up & go", SCHEMA)
    assert view["title"]["text"] == "A form with every kind…"  # Slack allows 24 characters
    assert view["blocks"][0]["text"]["text"] == "Set &lt;it&gt; up &amp; go"
    found = elements(view)
    assert found["Name"] == {
        "type": "plain_text_input", "min_length": 2, "max_length": 20, "initial_value": "orders", "action_id": "value",
    }  # fmt: skip
    assert found["Email"]["type"] == "email_text_input" and found["site"]["type"] == "url_text_input"
    assert found["day"] == {"type": "datepicker", "initial_date": "2026-11-24", "action_id": "value"}
    assert found["at"]["type"] == "datetimepicker"
    assert [o["text"]["text"] for o in found["size"]["options"]] == ["Small", "Medium", "Large"]
    assert found["size"]["initial_option"]["value"] == "m"
    assert found["ratio"]["is_decimal_allowed"] is True and found["ratio"]["min_value"] == "0.5"
    assert found["count"]["is_decimal_allowed"] is False and found["count"]["initial_value"] == "2"
    assert found["tags"]["type"] == "multi_static_select" and found["tags"]["max_selected_items"] == 3
    assert found["notify"]["type"] == "checkboxes" and found["notify"]["initial_options"][0]["value"] == "true"
    optional = {b["label"]["text"]: b["optional"] for b in view["blocks"] if b["type"] == "input"}
    assert optional["Name"] is False and optional["Email"] is True and optional["notify"] is True


def test_a_submitted_modal_reads_back_as_content_that_fits_the_schema() -> None:
    view = form_view("eli_1", "?", SCHEMA)
    answers = {
        "Name": "payments",
        "Email": "a@example.com",
        "size": "l",
        "ratio": "1.5",
        "count": "4",
        "tags": ["option-1", "option-11"],
        "notify": False,
    }
    values = submission("UALICE", view, answers)["view"]["state"]["values"]
    values[next(b["block_id"] for b in view["blocks"] if b.get("label", {}).get("text") == "at")]["value"] = {
        "type": "datetimepicker",
        "selected_date_time": 1_764_000_000,
    }
    content = content_of(SCHEMA, values)
    assert content == {
        "name": "payments",
        "email": "a@example.com",
        "day": "2026-11-24",
        "at": "2025-11-24T16:00:00Z",
        "size": "l",
        "ratio": 1.5,
        "count": 4,
        "tags": ["option-1", "option-11"],
        "notify": False,  # unticked is an answer, not a gap the default would fill
    }
    assert isinstance(decide(question(requested_schema=SCHEMA), Answer("accept", content), utcnow()), Resolve)


def test_schema_errors_become_errors_on_their_blocks() -> None:
    view = form_view("eli_1", "?", SCHEMA)
    values = submission("UALICE", view, {"Name": "x", "count": "2.5"})["view"]["state"]["values"]
    decision = decide(question(requested_schema=SCHEMA), Answer("accept", content_of(SCHEMA, values)), utcnow())
    assert isinstance(decision, Invalid)
    blocks = {b["label"]["text"]: b["block_id"] for b in view["blocks"] if b["type"] == "input"}
    assert modal_errors(SCHEMA, decision.errors) == {
        blocks["Name"]: "must be at least 2 characters",
        blocks["count"]: "must be an integer",
    }
    assert modal_errors(SCHEMA, [FieldError("", "content must be an object"), FieldError("x", "is not a field")]) == {
        blocks["Name"]: "content must be an object"
    }


def test_a_question_message_ends_without_buttons() -> None:
    text, pending = question_message("eli_1", "url", "Tracker requires authentication.", "UALICE")
    assert text == "Tracker requires authentication." and "url" not in str(pending[-1])
    assert [e["action_id"] for e in pending[-1]["elements"]] == ["elicithub.connect", "elicithub.decline"]
    for outcome, label in [("accepted", "Connected"), ("declined", "Declined"), ("expired", "Expired")]:
        text, ended = ended_message("url", "Tracker requires authentication.", outcome)
        assert label in text and all(b["type"] != "actions" for b in ended)
    assert "Answered" in ended_message("form", "Which region?", "accepted")[0]
    assert question(requested_schema=SCHEMA).state is State.PENDING


def yes_or_no(count: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"q{i}": {"type": "boolean"} for i in range(count)}}


def test_a_modal_holds_the_question_and_99_fields_at_most() -> None:
    assert len(form_view("eli_1", "Which hold?", yes_or_no(99))["blocks"]) == MODAL_BLOCKS == 100
    assert fits_modal(yes_or_no(99)) and not fits_modal(yes_or_no(100))


def test_a_form_too_long_for_a_modal_links_the_widget_instead_of_answer() -> None:
    url = "https://hub.example/?conversation=slack-T1-C1-1.2"
    _, shown = question_message("eli_1", "form", "Which hold?", "UALICE", widget_url=url)
    answer, decline, cancel = shown[-1]["elements"]
    assert (answer["text"]["text"], answer["url"], answer["action_id"]) == ("Answer in the browser", url, OPEN_LINK)
    assert (decline["action_id"], cancel["action_id"]) == ("elicithub.decline", "elicithub.cancel")
    assert "more fields than Slack shows in one form" in shown[1]["elements"][0]["text"]
