"""Asking a person at a terminal: each form field by its kind, re-asked with the reason until it is valid; shared by
`elicithub test --interactive` and `elicithub chat`."""

from __future__ import annotations

import math
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from elicithub.core.elicitation import Action, Answer
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.schema import validate_content
from elicithub.errors import HubError

HELP = "(Enter keeps a default; type /decline or /cancel to refuse; Ctrl-C cancels)"
_OMIT = object()


class _Refused(HubError):
    def __init__(self, action: Action) -> None:
        super().__init__(action)
        self.action = action


def is_terminal() -> bool:
    """Whether a person can be asked: never wait for an answer on a pipe or a file."""
    return sys.stdin.isatty()


def read_line(prompt: str) -> str:
    """`input`, with Ctrl-C raising KeyboardInterrupt even under an event loop that handles SIGINT itself."""
    if threading.current_thread() is not threading.main_thread():
        return input(prompt)
    # An event loop's own handler (and its wakeup fd) would see the Ctrl-C later as well: both are set aside.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    wakeup = signal.set_wakeup_fd(-1)
    try:
        return input(prompt)
    finally:
        signal.set_wakeup_fd(wakeup)
        signal.signal(signal.SIGINT, previous)


@dataclass
class Terminal:
    """The prompt; `read` and `write` are the terminal's (swapped in tests)."""

    read: Callable[[str], str] = read_line
    write: Callable[[str], None] = print

    def form(self, message: str, schema: Mapping[str, Any]) -> Answer:
        """Ask each field of a form; decline, cancel, Ctrl-C and end of input end it early."""
        self.write(message)
        self.write(f"  {HELP}")
        required = set(schema.get("required") or [])
        content: JsonObject = {}
        try:
            for name, prop in (schema.get("properties") or {}).items():
                value = self._field(name, prop, name in required)
                if value is not _OMIT:
                    content[name] = value
        except _Refused as refused:
            self.write(f"  {refused.action}d." if refused.action == "decline" else "  cancelled.")
            return Answer(refused.action)
        except (KeyboardInterrupt, EOFError):
            self.write("\n  cancelled.")
            return Answer("cancel")
        return Answer("accept", content)

    def url(self, message: str, url: str) -> Answer:
        """A url question in a test: the person opens the link, then says they are done."""
        self.write(message)
        self.write(f"  Open {url}")
        try:
            said = self.read("  Press Enter once done, or type /decline or /cancel: ").strip()
        except (KeyboardInterrupt, EOFError):
            return Answer("cancel")
        return Answer("decline") if said == "/decline" else Answer("cancel") if said == "/cancel" else Answer("accept")

    def _field(self, name: str, prop: Mapping[str, Any], required: bool) -> Any:
        title = str(prop.get("title") or name)
        if prop.get("description"):
            self.write(f"  {title}: {prop['description']}")
        options = _options(prop)
        for number, (value, label) in enumerate(options or [], start=1):
            self.write(f"    {number}. {label}" + (f" ({value})" if label != value else ""))
        hint = _hint(prop, options, required)
        while True:
            raw = self.read(f"  {title}{hint}: ").strip()
            if raw in ("/decline", "/cancel"):
                raise _Refused("decline" if raw == "/decline" else "cancel")
            if not raw:
                if prop.get("default") is not None:
                    default = prop["default"]
                    return list(default) if isinstance(default, list) else default
                if not required:
                    return _OMIT
                problem: str | None = "is required"
            else:
                value, problem = _parse(prop, raw, options)
                if problem is None:
                    errors = validate_content({"type": "object", "properties": {name: prop}}, {name: value})
                    if not errors:
                        return value
                    problem = errors[0].message
            self.write(f"    {title} {problem}; try again.")


def _options(prop: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """A select's choices as (value, title); plain enums are their own titles."""
    source = prop.get("items") if prop.get("type") == "array" else prop
    if not isinstance(source, Mapping):
        return None
    if isinstance(source.get("enum"), list):
        names = prop.get("enumNames") if isinstance(prop.get("enumNames"), list) else None
        values = [str(v) for v in source["enum"]]
        return list(zip(values, [str(n) for n in names], strict=False)) if names else [(v, v) for v in values]
    for key in ("oneOf", "anyOf"):
        if isinstance(source.get(key), list):
            return [(str(o.get("const")), str(o.get("title") or o.get("const"))) for o in source[key]]
    return None


def _hint(prop: Mapping[str, Any], options: list[tuple[str, str]] | None, required: bool) -> str:
    kind = prop.get("type")
    parts: list[str] = []
    if options is not None:
        parts.append("numbers or values, comma-separated" if kind == "array" else "number or value")
    elif kind == "boolean":
        parts.append("y/n")
    elif kind in ("integer", "number"):
        low, high = prop.get("minimum"), prop.get("maximum")
        bounded = low is not None or high is not None
        span = f"{low if low is not None else ''}–{high if high is not None else ''}" if bounded else ""
        parts.append(f"{'whole number' if kind == 'integer' else 'number'}{' ' + span if span else ''}")
    elif prop.get("format"):
        parts.append(str(prop["format"]))
    if not required:
        parts.append("optional")
    default = prop.get("default")
    shown = "" if default is None else f" [default: {_show(default)}]"
    return (f" ({', '.join(parts)})" if parts else "") + shown


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "y" if value else "n"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def _parse(prop: Mapping[str, Any], raw: str, options: list[tuple[str, str]] | None) -> tuple[Any, str | None]:
    """The typed value of what was typed, or why it cannot be one (the schema's own checks come after)."""
    kind = prop.get("type")
    if kind == "boolean":
        said = raw.lower()
        if said in ("y", "yes", "true"):
            return True, None
        if said in ("n", "no", "false"):
            return False, None
        return None, "must be yes or no (y/n)"
    if kind == "integer":
        try:
            return int(raw), None
        except ValueError:
            return None, "must be a whole number"
    if kind == "number":
        try:
            number = float(raw)
        except ValueError:
            return None, "must be a number"
        return (number, None) if math.isfinite(number) else (None, "must be a finite number")
    if options is not None:
        items = [item.strip() for item in raw.split(",")] if kind == "array" else [raw]
        picked = [_choice(item, options) for item in items]
        unknown = [item for item, value in zip(items, picked, strict=True) if value is None]
        if unknown:
            return None, f"has no choice {unknown[0]!r}"
        return (picked if kind == "array" else picked[0]), None
    return raw, None


def _choice(raw: str, options: list[tuple[str, str]]) -> str | None:
    if raw.isdigit() and 1 <= int(raw) <= len(options):
        return options[int(raw) - 1][0]
    for value, label in options:
        if raw == value or raw.lower() == label.lower():
            return value
    return None
