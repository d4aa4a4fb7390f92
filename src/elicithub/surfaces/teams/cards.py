"""Adaptive Cards for questions (typed with `microsoft-teams-cards`): the card built from a flat schema, the way back
from its `Action.Execute` data to answer content, its field errors, the sign-in link, and the card once ended.

Each field is an input `q<position>` (property names may be anything, and `Action.Execute` merges input values into
the action's own data by id); a date-time is two, `q<n>` and `q<n>.time` (UTC).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from microsoft_teams.cards import (
    AdaptiveCard,
    CardElement,
    Choice,
    ChoiceSetInput,
    DateInput,
    ExecuteAction,
    Fact,
    FactSet,
    NumberInput,
    OpenUrlAction,
    TeamsCardProperties,
    TextBlock,
    TextInput,
    TimeInput,
    ToggleInput,
)
from microsoft_teams.cards.core import Action

from elicithub.core.schema import FieldError
from elicithub.surfaces.choices import titled_choices

ANSWER = "elicithub.answer"
DECLINE = "elicithub.decline"
CANCEL = "elicithub.cancel"
CONNECT = "elicithub.connect"

CARD_MAX = 26_000
"""Teams takes a message of at most about 28 KB; a card past this (a form of very many fields) is answered in the
web widget instead."""

EXPANDED_MAX = 10
"""Up to this many choices are shown at once (radio buttons, checkboxes); more are a drop-down."""
FILTERED_MIN = 100
"""Past this many choices a single choice is searched as the person types."""

_ENDED = {
    "accepted": "✅ {accepted}",
    "declined": "🚫 Declined",
    "cancelled": "✖️ Cancelled",
    "expired": "⌛ Expired",
}


@dataclass(frozen=True)
class Choices:
    """A choice field's values and titles. A multi-select answers its values joined by commas, so when a value holds
    a comma (or is empty, or repeats) every choice carries its position instead and the answer maps it back."""

    values: list[str]
    titles: list[str]

    @classmethod
    def of(cls, prop: dict[str, Any]) -> Choices | None:
        found = titled_choices(prop)
        return None if found is None else cls(*found)

    @property
    def by_position(self) -> bool:
        fits = all(v and "," not in v for v in self.values)
        return not fits or len(set(self.values)) < len(self.values)

    def value(self, index: int) -> str:
        return str(index) if self.by_position else self.values[index]

    def choices(self) -> list[Choice]:
        return [Choice(title=title, value=self.value(i)) for i, title in enumerate(self.titles)]

    def chosen(self, values: list[Any]) -> str | None:
        """The input's value for these values (a default), in the schema's order."""
        wanted = {str(v) for v in values}
        found = [self.value(i) for i, value in enumerate(self.values) if value in wanted]
        return ",".join(found) or None

    def value_of(self, sent: str) -> str:
        """The exact value a choice stands for; one that stands for none is returned as sent, for the schema check."""
        if self.by_position and sent.isdigit() and int(sent) < len(self.values):
            return self.values[int(sent)]
        return sent


def card_json(card: AdaptiveCard) -> dict[str, Any]:
    """The card as Teams takes it (camelCase, nothing unset)."""
    return dict(card.model_dump(by_alias=True, exclude_none=True))


def new_card(body: Sequence[CardElement], actions: Sequence[Action] | None = None) -> AdaptiveCard:
    return AdaptiveCard(
        body=list(body), actions=list(actions) if actions else None, msteams=TeamsCardProperties(width="full")
    )


def text(value: str, **style: Any) -> TextBlock:
    return TextBlock(text=value, wrap=True, **style)


def note(value: str) -> TextBlock:
    return text(value, is_subtle=True, size="Small", spacing="Small")


def execute(title: str, verb: str, elicitation_id: str, *, inputs: bool = False, style: Any = None) -> ExecuteAction:
    """A button that answers: its verb, the question it answers, and (`inputs`) the card's inputs."""
    return ExecuteAction(
        title=title,
        verb=verb,
        data={"elicitationId": elicitation_id},
        associated_inputs="auto" if inputs else "none",
        style=style,
    )


def _properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    properties = schema.get("properties") or {}
    return [(str(name), prop) for name, prop in properties.items() if isinstance(prop, dict)]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _inputs(position: int, name: str, prop: dict[str, Any], required: bool, given: dict[str, Any]) -> list[Any]:
    """The input(s) of one field, filled with what was given (a refused answer) or else its default."""
    key = f"q{position}"
    label = str(prop.get("title") or name)
    kind, default = prop.get("type"), prop.get("default")
    sent = given.get(key)
    choices = Choices.of(prop)
    if kind == "boolean":
        value = sent if isinstance(sent, str) else "true" if default is True else "false"
        return [ToggleInput(id=key, title=label, value=value, value_on="true", value_off="false", wrap=True)]
    if kind == "array":
        choices = choices or Choices([], [])
        chosen = sent if isinstance(sent, str) else choices.chosen(default if isinstance(default, list) else [])
        style: Literal["compact", "expanded", "filtered"] = (
            "expanded" if len(choices.values) <= EXPANDED_MAX else "compact"
        )
        return [
            ChoiceSetInput(
                id=key, label=label, choices=choices.choices(), is_multi_select=True, style=style, value=chosen
            )
        ]
    marks: dict[str, Any] = {"id": key, "label": label}
    if required:
        marks.update(is_required=True, error_message="is required")
    if kind in ("number", "integer"):
        number = _number(_parsed(sent)) if isinstance(sent, str) else None
        return [
            NumberInput(
                **marks,
                min=_number(prop.get("minimum")),
                max=_number(prop.get("maximum")),
                value=number if number is not None else _number(default),
            )
        ]
    if choices is not None:
        chosen = sent if isinstance(sent, str) else choices.chosen([default] if default is not None else [])
        style = "filtered" if len(choices.values) > FILTERED_MIN else "compact"  # searched as the person types
        return [ChoiceSetInput(**marks, choices=choices.choices(), value=chosen, style=style, placeholder="Choose")]
    fmt = prop.get("format")
    if fmt == "date":
        return [DateInput(**marks, value=sent if isinstance(sent, str) else default)]
    if fmt == "date-time":
        date, time = _split_moment(default) if isinstance(default, str) else (None, None)
        day = DateInput(**{**marks, "label": f"{label} (UTC)"}, value=given.get(key, date))
        return [day, TimeInput(id=f"{key}.time", is_required=required or None, value=given.get(f"{key}.time", time))]
    kinds: dict[str, Literal["Email", "Url"]] = {"email": "Email", "uri": "Url"}
    max_length = prop.get("maxLength")
    return [
        TextInput(
            **marks,
            style=kinds.get(str(fmt)),
            max_length=max_length if isinstance(max_length, int) else None,
            value=sent if isinstance(sent, str) else default if isinstance(default, str) else None,
        )
    ]


def _split_moment(value: str) -> tuple[str | None, str | None]:
    """A date-time default as the date and time inputs show it (UTC)."""
    date, _, time = value.partition("T")
    return date or None, time[:5] or None


def form_body(schema: dict[str, Any], given: dict[str, Any], errors: dict[str, str]) -> list[Any]:
    """An input per field (its description and any error below it), filled with `given` or the defaults."""
    required = set(schema.get("required") or [])
    body: list[Any] = []
    for position, (name, prop) in enumerate(_properties(schema)):
        # An unticked toggle or an empty multi-select is an answer (false, no choices): never marked required.
        marked = name in required and prop.get("type") not in ("boolean", "array")
        body.extend(_inputs(position, name, prop, marked, given))
        if prop.get("description"):
            body.append(note(str(prop["description"])))
        if f"q{position}" in errors:
            body.append(text(errors[f"q{position}"], color="Attention", size="Small", spacing="None"))
    return body


def question_card(
    elicitation_id: str,
    message: str,
    schema: dict[str, Any],
    asked: str,
    agents: list[str] | None = None,
    given: dict[str, Any] | None = None,
    errors: dict[str, str] | None = None,
) -> AdaptiveCard:
    """The card of an open form question: the question, who it is for, its inputs, Submit / Decline / Cancel. A
    refused answer comes back with what was sent (`given`) and the errors under their fields."""
    said = f"A question for {asked}."
    if agents and len(agents) > 1:
        said += f" (from {' → '.join(agents)})"
    body: list[Any] = [text(message, weight="Bolder"), note(said)]
    if errors and "" in errors:
        body.append(text(errors[""], color="Attention"))
    body.extend(form_body(schema, given or {}, errors or {}))
    actions: list[Action] = [
        execute("Submit", ANSWER, elicitation_id, inputs=True, style="positive"),
        execute("Decline", DECLINE, elicitation_id),
        execute("Cancel", CANCEL, elicitation_id),
    ]
    return new_card(body, actions)


def fits(card: AdaptiveCard) -> bool:
    """Whether Teams takes the card in one message."""
    return len(json.dumps(card_json(card))) <= CARD_MAX


def widget_card(elicitation_id: str, message: str, asked: str, url: str) -> AdaptiveCard:
    """A form with more fields than a card holds: answered in the web widget on the conversation."""
    body = [text(message, weight="Bolder"), note(f"A question for {asked}, with more fields than a card holds.")]
    actions: list[Action] = [
        OpenUrlAction(title="Answer in the browser", url=url),
        execute("Decline", DECLINE, elicitation_id),
        execute("Cancel", CANCEL, elicitation_id),
    ]
    return new_card(body, actions)


def sign_in_card(elicitation_id: str, message: str, asked: str, url: str | None) -> AdaptiveCard:
    """A sign-in's card. With its link (`url`, in a 1:1 chat only its person sees) Connect opens it and New link
    replaces it with a fresh one (a link works once); without (where others see the card) Connect sends the link to
    the person's own chat with the bot."""
    decline = execute("Decline", DECLINE, elicitation_id)
    if url is None:
        said = f"Only {asked} can connect; the link was sent to them in their chat with the bot."
        actions: list[Action] = [execute("Connect", CONNECT, elicitation_id, style="positive"), decline]
    else:
        said = "The link works once; New link gives another."
        connect = OpenUrlAction(title="Connect", url=url, style="positive")
        actions = [connect, execute("New link", CONNECT, elicitation_id), decline]
    return new_card([text(message, weight="Bolder"), note(said)], actions)


def link_card(server: str, url: str) -> AdaptiveCard:
    """The card that hands one person their sign-in link, in their 1:1 chat with the bot."""
    account = f"your {server} account" if server else "your account"
    body = [text(f"Connect {account} to continue."), note("Only you can see this; the link works once.")]
    return new_card(body, [OpenUrlAction(title=f"Connect {server}".strip(), url=url, style="positive")])


def ended_label(mode: str, outcome: str) -> str:
    """How a question's card says it ended: Connected, Answered, Declined, Cancelled or Expired."""
    return _ENDED.get(outcome, outcome).format(accepted="Connected" if mode == "url" else "Answered")


def ended_card(mode: str, message: str, outcome: str, by: str | None, answered: list[tuple[str, str]]) -> AdaptiveCard:
    """A question's card once it ended, for everyone: its buttons gone, how it ended and by whom, and what was
    chosen (`answered`: each field's title and answer)."""
    label = ended_label(mode, outcome) + (f" by {by}" if by else "")
    body: list[Any] = [text(message, weight="Bolder")]
    if answered:
        body.append(FactSet(facts=[Fact(title=title, value=value) for title, value in answered]))
    body.append(note(label))
    return new_card(body)


def answered_facts(schema: dict[str, Any], content: dict[str, Any] | None) -> list[tuple[str, str]]:
    """An answer as the ended card shows it: each field's title and its value, choices by their titles."""
    found = []
    for name, prop in _properties(schema):
        if content is None or name not in content:
            continue
        value = content[name]
        choices = Choices.of(prop)
        titles = dict(zip(choices.values, choices.titles, strict=True)) if choices is not None else {}
        if isinstance(value, bool):
            shown = "Yes" if value else "No"
        elif isinstance(value, list):
            shown = ", ".join(titles.get(str(v), str(v)) for v in value) or "none"
        else:
            shown = titles.get(str(value), str(value))
        found.append((str(prop.get("title") or name), shown))
    return found


# The way back: what Action.Execute sent (the inputs' values, as strings) to answer content.


def content_of(schema: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """The answer content of a submitted card, read by each field's schema kind; an empty input is no answer."""
    content: dict[str, Any] = {}
    for position, (name, prop) in enumerate(_properties(schema)):
        value = _value(prop, data, f"q{position}")
        if value is not None:
            content[name] = value
    return content


def _value(prop: dict[str, Any], data: dict[str, Any], key: str) -> Any:
    kind, choices = prop.get("type"), Choices.of(prop)
    sent = data.get(key)
    sent = sent if isinstance(sent, str) else None if sent is None else str(sent)
    if kind == "boolean":
        return sent == "true"
    if kind == "array":
        picked = [v for v in (sent or "").split(",") if v]
        return [choices.value_of(v) for v in picked] if choices is not None else picked
    if not sent:
        return None
    if kind in ("number", "integer"):
        return _parsed(sent)
    if choices is not None:
        return choices.value_of(sent)
    if prop.get("format") == "date-time":
        time = data.get(f"{key}.time") or "00:00"
        return f"{sent}T{time}:00Z" if len(str(time)) == 5 else f"{sent}T{time}Z"
    return sent


def _parsed(text: str) -> Any:
    """A number input's text as a number; text that is none stays text, for the schema check to name."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def field_errors(schema: dict[str, Any], errors: list[FieldError]) -> dict[str, str]:
    """Field errors by input id (`q<position>`); one about the whole answer, or a field the card lacks, under ""."""
    inputs = {name: f"q{position}" for position, (name, _) in enumerate(_properties(schema))}
    found: dict[str, str] = {}
    for error in errors:
        key = inputs.get(error.field, "")
        label = "" if error.field in inputs or not error.field else f"{error.field}: "
        found.setdefault(key, f"{label}{error.message}")
    return found
