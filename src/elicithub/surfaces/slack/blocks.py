"""Block Kit for questions, as plain values: the thread message, the private Connect link, the modal built from a
flat schema, and the way back from a submitted modal to answer content and from field errors to modal errors."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from elicithub.core.schema import FieldError
from elicithub.surfaces.slack.choices import CHECKBOX_OPTIONS, Choices, Option
from elicithub.surfaces.slack.text import SECTION_MAX, escape, mrkdwn, plain, shorten

Block = dict[str, Any]

ANSWER = "elicithub.answer"
DECLINE = "elicithub.decline"
CANCEL = "elicithub.cancel"
CONNECT = "elicithub.connect"
OPEN_LINK = "elicithub.open"
FORM = "elicithub.form"

MODAL_BLOCKS = 100
"""The most blocks Slack lets a modal have: a form's question takes one, each of its fields one more."""

_ENDED = {
    "accepted": ":white_check_mark: {accepted}",
    "declined": ":no_entry_sign: Declined",
    "cancelled": ":heavy_multiplication_x: Cancelled",
    "expired": ":hourglass: Expired",
}


def _button(text: str, action_id: str, value: str, style: str | None = None) -> Block:
    button: Block = {"type": "button", "text": plain(text, 75), "action_id": action_id, "value": value}
    if style is not None:
        button["style"] = style
    return button


def question_message(
    elicitation_id: str,
    mode: str,
    message: str,
    slack_user: str,
    agents: list[str] | None = None,
    widget_url: str | None = None,
) -> tuple[str, list[Block]]:
    """The thread message of an open question. A sign-in shows no link here: the link reaches its person privately.
    A form with more fields than a modal holds is answered in the web widget, at `widget_url`. A delegated agent's
    question says which agents it came through (`agents`, outermost first)."""
    if mode == "url":
        note = f"Only <@{slack_user}> can connect; the link was sent to them privately."
        buttons = [_button("Connect", CONNECT, elicitation_id, "primary"), _button("Decline", DECLINE, elicitation_id)]
    else:
        note = f"A question for <@{slack_user}>."
        answer = _button("Answer", ANSWER, elicitation_id, "primary")
        if widget_url is not None:
            note = f"A question for <@{slack_user}>, with more fields than Slack shows in one form."
            answer = {**_button("Answer in the browser", OPEN_LINK, "open", "primary"), "url": widget_url}
        buttons = [answer, _button("Decline", DECLINE, elicitation_id), _button("Cancel", CANCEL, elicitation_id)]
    if agents and len(agents) > 1:
        note += f" (from {escape(' → '.join(agents))})"
    blocks: list[Block] = [
        {"type": "section", "text": mrkdwn(message)},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]},
        {"type": "actions", "block_id": "question", "elements": buttons},
    ]
    return message, blocks


def ended_label(mode: str, outcome: str) -> str:
    """How a question's message says it ended: Connected, Answered, Declined, Cancelled or Expired."""
    return _ENDED.get(outcome, outcome).format(accepted="Connected" if mode == "url" else "Answered")


def ended_message(mode: str, message: str, outcome: str) -> tuple[str, list[Block]]:
    """The same message once the question has ended: its buttons gone, its end said."""
    label = ended_label(mode, outcome)
    blocks: list[Block] = [
        {"type": "section", "text": mrkdwn(message)},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": label}]},
    ]
    return f"{message} ({label.split(' ', 1)[1]})", blocks


def connect_link(server: str, url: str) -> tuple[str, list[Block]]:
    """The ephemeral message that hands one person their sign-in link."""
    account = f"your {server} account" if server else "your account"
    text = f"Connect {account} (only you can see this)."
    blocks: list[Block] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"Only you can see this. Connect {escape(account)} to continue; the link works once.",
            },
        },
        {
            "type": "actions",
            "elements": [{**_button(f"Connect {server}".strip(), OPEN_LINK, "open", "primary"), "url": url}],
        },
    ]
    return text, blocks


def notice_view(title: str, text: str) -> Block:
    """A modal that only says something (the question ended meanwhile, or is someone else's)."""
    return {
        "type": "modal",
        "title": plain(title, 24),
        "close": plain("Close", 24),
        "blocks": [{"type": "section", "text": mrkdwn(text)}],
    }


# The modal: one input block per schema property, its block id `q<position>` (property names may be anything).


def _properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    properties = schema.get("properties") or {}
    return [(str(name), prop) for name, prop in properties.items() if isinstance(prop, dict)]


def _element(prop: dict[str, Any]) -> Block:
    kind, default = prop.get("type"), prop.get("default")
    choices = Choices.of(prop)
    element: Block
    if kind == "boolean":
        yes = {"text": plain("Yes", 75), "value": "true"}
        element = {"type": "checkboxes", "options": [yes]}
        if default is True:
            element["initial_options"] = [yes]
    elif kind == "array":
        choices = choices or Choices([], [])
        if len(choices) <= CHECKBOX_OPTIONS:
            element = {"type": "checkboxes", "options": choices.options()}
        else:
            element = _select(choices, "multi_")
            if isinstance(prop.get("maxItems"), int):
                element["max_selected_items"] = max(1, prop["maxItems"])
        chosen = choices.chosen(default if isinstance(default, list) else [])
        if chosen:
            element["initial_options"] = chosen
    elif kind in ("number", "integer"):
        element = {"type": "number_input", "is_decimal_allowed": kind == "number"}
        for key, slack_key in (("minimum", "min_value"), ("maximum", "max_value"), ("default", "initial_value")):
            if prop.get(key) is not None:
                element[slack_key] = _number_text(prop[key])
    elif choices is not None:
        element = _select(choices)
        chosen = choices.chosen([default] if default is not None else [])
        if chosen:
            element["initial_option"] = chosen[0]
    elif prop.get("format") == "date":
        element = {"type": "datepicker"}
        if isinstance(default, str):
            element["initial_date"] = default
    elif prop.get("format") == "date-time":
        element = {"type": "datetimepicker"}
        if isinstance(default, str):
            element["initial_date_time"] = int(datetime.fromisoformat(default.replace("Z", "+00:00")).timestamp())
    else:
        input_type = {"email": "email_text_input", "uri": "url_text_input"}.get(str(prop.get("format")))
        element = {"type": input_type or "plain_text_input"}
        if input_type is None:
            for key, slack_key in (("minLength", "min_length"), ("maxLength", "max_length")):
                if isinstance(prop.get(key), int):
                    element[slack_key] = min(prop[key], SECTION_MAX)
        if isinstance(default, str):
            element["initial_value"] = default
    return {**element, "action_id": "value"}


def _select(choices: Choices, multi: str = "") -> Block:
    """A (multi-)select of the choices: static when they fit one list, else searched as the person types."""
    if choices.searched:
        return {
            "type": f"{multi}external_select",
            "min_query_length": 0,  # opened, it lists the first choices at once
            "placeholder": plain(f"Type to search {len(choices)} choices", 150),
        }
    return {"type": f"{multi}static_select", "options": choices.options(), "placeholder": plain("Choose", 150)}


def _number_text(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def fits_modal(schema: dict[str, Any]) -> bool:
    """Whether a form's modal stays within Slack's limit on blocks."""
    return 1 + len(_properties(schema)) <= MODAL_BLOCKS


def form_view(elicitation_id: str, message: str, schema: dict[str, Any], callback_id: str = FORM) -> Block:
    """The modal for a form question: the question, then an input per field, its default filled in. `callback_id`
    says whose submission it is (a question's, or an approver's)."""
    required = set(schema.get("required") or [])
    blocks: list[Block] = [{"type": "section", "text": mrkdwn(message)}]
    for position, (name, prop) in enumerate(_properties(schema)):
        block: Block = {
            "type": "input",
            "block_id": f"q{position}",
            "label": plain(str(prop.get("title") or name), 2000),
            "element": _element(prop),
            # An unticked box is an answer (false, or no choices), so checkboxes never block a submit.
            "optional": name not in required or prop.get("type") in ("boolean", "array"),
        }
        if prop.get("description"):
            block["hint"] = plain(str(prop["description"]), 2000)
        blocks.append(block)
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": elicitation_id,
        "title": plain(str(schema.get("title") or "Your answer"), 24),
        "submit": plain("Submit", 24),
        "close": plain("Close", 24),
        "blocks": blocks,
    }


def content_of(schema: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The answer content of a submitted modal (`view.state.values`), read by each field's schema kind."""
    content: dict[str, Any] = {}
    for position, (name, prop) in enumerate(_properties(schema)):
        state = (values.get(f"q{position}") or {}).get("value") or {}
        value = _value(prop, state)
        if value is not None:
            content[name] = value
    return content


def _value(prop: dict[str, Any], state: dict[str, Any]) -> Any:
    kind, choices = prop.get("type"), Choices.of(prop)
    if kind in ("boolean", "array"):
        chosen = [str(o.get("value")) for o in state.get("selected_options") or []]
        if kind == "boolean":
            return bool(chosen)
        return [choices.value_of(v) for v in chosen] if choices is not None else chosen
    if kind in ("number", "integer"):
        return _number(state.get("value"))
    if choices is not None:
        selected = (state.get("selected_option") or {}).get("value")
        return None if selected is None else choices.value_of(str(selected))
    if prop.get("format") == "date":
        return state.get("selected_date")
    if prop.get("format") == "date-time":
        stamp = state.get("selected_date_time")
        return None if stamp is None else datetime.fromtimestamp(int(stamp), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return state.get("value") or None


def _number(text: Any) -> Any:
    """A number input's text as a number; text that is none stays text, for the schema check to name."""
    if text is None or text == "":
        return None
    try:
        return int(text)
    except (TypeError, ValueError):
        pass
    try:
        number = float(text)
    except (TypeError, ValueError):
        return text
    return number if math.isfinite(number) else text


def suggestions(schema: dict[str, Any], block_id: str, typed: str) -> list[Option]:
    """The options of a searched choice field (its block id `q<position>`) that match what the person typed."""
    for position, (_, prop) in enumerate(_properties(schema)):
        if f"q{position}" == block_id and (choices := Choices.of(prop)) is not None:
            return choices.matching(typed)
    return []


def modal_errors(schema: dict[str, Any], errors: list[FieldError]) -> dict[str, str]:
    """Field errors as Slack's `response_action: errors` (block id -> message); one about the whole answer goes on
    the first field."""
    blocks = {name: f"q{position}" for position, (name, _) in enumerate(_properties(schema))}
    first = next(iter(blocks.values()), "q0")
    found: dict[str, str] = {}
    for error in errors:
        block = blocks.get(error.field, first)
        label = "" if error.field in blocks else f"{error.field}: " if error.field else ""
        found.setdefault(block, shorten(f"{label}{error.message}", 150))
    return found
