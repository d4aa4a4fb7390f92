"""Choice fields within Slack's limits: long labels shortened visibly, values that do not fit mapped by position
and back exactly, long lists searched as the person types, end to end through the Slack endpoint."""

from __future__ import annotations

from typing import Any

from elicithub.core.elicitation import Answer, Invalid, Resolve, decide, utcnow
from elicithub.surfaces.slack.blocks import content_of, form_view, suggestions
from elicithub.surfaces.slack.choices import MAX_OPTIONS, OPTION_TEXT_MAX, OPTION_VALUE_MAX, Choices
from tests.core_fixtures import question
from tests.servers.mrtr_server import LONG_VALUE, PICK
from tests.surfaces.slack.conftest import ALICE, BOB, SlackHub, submission, suggestion
from tests.surfaces.slack.standin import SlackStandIn
from tests.surfaces.slack.test_forms import question_in, replies_after

LONG_TITLE = "A title far longer than the seventy-five characters a Slack option can show in its menu"


def options_in(view: dict[str, Any]) -> list[dict[str, Any]]:
    """Every option object anywhere in a view."""
    found: list[dict[str, Any]] = []
    for block in view["blocks"]:
        element = block.get("element") or {}
        found += element.get("options", []) + element.get("initial_options", [])
        found += [element["initial_option"]] if "initial_option" in element else []
    return found


def within_slack_limits(options: list[dict[str, Any]]) -> bool:
    return all(
        0 < len(o["value"]) <= OPTION_VALUE_MAX and 0 < len(o["text"]["text"]) <= OPTION_TEXT_MAX for o in options
    )


def field(prop: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"pick": prop}, "required": ["pick"]}


def answered(schema: dict[str, Any], view: dict[str, Any], chosen: Any) -> dict[str, Any]:
    [label] = [b["label"]["text"] for b in view["blocks"] if b["type"] == "input"]
    return content_of(schema, submission(ALICE, view, {label: chosen})["view"]["state"]["values"])


def test_values_that_fit_travel_as_they_are_and_long_titles_are_shortened_visibly() -> None:
    schema = field({"type": "string", "oneOf": [{"const": "eu", "title": LONG_TITLE}, {"const": "us", "title": "US"}]})
    view = form_view("eli_1", "?", schema)
    [long, short] = view["blocks"][1]["element"]["options"]
    assert long["value"] == "eu" and short == {"text": {"type": "plain_text", "text": "US"}, "value": "us"}
    assert len(long["text"]["text"]) == OPTION_TEXT_MAX and long["text"]["text"].endswith("…")
    assert LONG_TITLE.startswith(long["text"]["text"][:-1])
    assert answered(schema, view, "eu") == {"pick": "eu"}


def test_a_value_too_long_for_slack_is_sent_as_its_position_and_mapped_back_exactly() -> None:
    schema = field({"type": "string", "enum": ["short", LONG_VALUE], "default": LONG_VALUE})
    view = form_view("eli_1", "?", schema)
    element = view["blocks"][1]["element"]
    assert [o["value"] for o in element["options"]] == ["0", "1"]  # every option of the field, so none is ambiguous
    assert element["initial_option"]["value"] == "1"  # the default, found by its exact value
    assert within_slack_limits(options_in(view))
    content = answered(schema, view, "1")
    assert content == {"pick": LONG_VALUE}
    elicitation = question(requested_schema=schema)
    assert isinstance(decide(elicitation, Answer("accept", content), utcnow()), Resolve)
    # An option value that stands for no choice is not guessed at: the schema check refuses it by name.
    stray = content_of(schema, {"q0": {"value": {"selected_option": {"value": "7"}}}})
    assert stray == {"pick": "7"}
    assert isinstance(decide(elicitation, Answer("accept", stray), utcnow()), Invalid)


def test_empty_or_repeated_values_are_sent_by_position_too() -> None:
    assert Choices(["", "a"], ["None", "A"]).by_position
    assert Choices(["a", "a"], ["A", "A again"]).by_position
    assert not Choices(["a", "b" * OPTION_VALUE_MAX], ["A", "B"]).by_position
    assert Choices(["a", "b" * (OPTION_VALUE_MAX + 1)], ["A", "B"]).value_of("1") == "b" * (OPTION_VALUE_MAX + 1)


def test_more_than_a_hundred_choices_are_searched_as_the_person_types() -> None:
    view = form_view("eli_1", "?", PICK)
    site, extras = (b["element"] for b in view["blocks"][1:])
    assert site["type"] == "external_select" and "options" not in site and site["min_query_length"] == 0
    assert site["placeholder"]["text"] == "Type to search 251 choices"
    assert extras["type"] == "multi_external_select" and "options" not in extras
    first = suggestions(PICK, "q0", "")
    assert len(first) == MAX_OPTIONS and first[0]["text"]["text"] == "Site number 000"
    assert [o["text"]["text"] for o in suggestions(PICK, "q0", "NUMBER 24")] == [
        f"Site number {i}" for i in range(240, 250)
    ]
    [far] = suggestions(PICK, "q0", "far site")
    assert far["value"] == "250" and within_slack_limits([*suggestions(PICK, "q0", ""), far])
    assert [o["value"] for o in suggestions(PICK, "q1", "extra-11")] == [f"extra-11{i}" for i in range(10)]
    assert suggestions(PICK, "q0", "nowhere") == [] and suggestions(PICK, "q9", "") == []


def test_a_long_list_is_searched_and_answered_in_slack(mrtr_slack_hub: SlackHub, standin: SlackStandIn) -> None:
    hub = mrtr_slack_hub
    thread = hub.say(ALICE, "/call mrtr.pick {}")
    question = question_in(standin, thread)
    hub.press(ALICE, question, "elicithub.answer")
    view: dict[str, Any] = standin.wait(lambda: standin.views[-1] if standin.views else None)
    assert within_slack_limits(options_in(view))

    searched = hub.interact(suggestion(ALICE, view, "Site", "far"))
    assert searched.status_code == 200, searched.text
    [far] = searched.json()["options"]
    assert far["text"]["text"].endswith("…")
    extras = hub.interact(suggestion(ALICE, view, "Extras", "extra-00")).json()["options"]
    assert len(extras) == 10
    # Only the asked person gets the choices.
    assert hub.interact(suggestion(BOB, view, "Site", "far")).json() == {"options": []}

    assert hub.submit(ALICE, view, {"Site": far, "Extras": extras[:2]}) == {}
    standin.wait(lambda: "Answered" in question.context() and not question.buttons())
    [reply] = standin.wait(lambda: replies_after(standin, thread, question))
    assert reply.text == f"Picked {LONG_VALUE} with 2 extras: extra-000, extra-001."
    assert hub.interact(suggestion(ALICE, view, "Site", "far")).json() == {"options": []}  # the question has ended
