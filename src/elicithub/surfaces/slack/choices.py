"""Choice fields within Slack's limits.

A select holds at most 100 options, an option's text 75 characters and its value 150. Labels too long are shortened
visibly. When a value does not fit (or is empty, or repeats), every option of the field carries its position
instead and the answer maps it back to the exact value; nothing is cut. A list of more than 100 choices becomes an
external select: Slack asks the app for the options matching what the person types (`block_suggestion`), and gets
the first 100 that match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elicithub.surfaces.choices import titled_choices
from elicithub.surfaces.slack.text import plain

MAX_OPTIONS = 100
CHECKBOX_OPTIONS = 10  # more choices than this become a multi-select
OPTION_TEXT_MAX = 75
OPTION_VALUE_MAX = 150

Option = dict[str, Any]


@dataclass(frozen=True)
class Choices:
    """A choice field's values and their titles, in the schema's order."""

    values: list[str]
    titles: list[str]

    @classmethod
    def of(cls, prop: dict[str, Any]) -> Choices | None:
        """The choices of a field (its items' for an array), or None for a free field."""
        found = titled_choices(prop)
        return None if found is None else cls(*found)

    def __len__(self) -> int:
        return len(self.values)

    @property
    def searched(self) -> bool:
        """Too many for one list: the person types and Slack asks for what matches."""
        return len(self.values) > MAX_OPTIONS

    @property
    def by_position(self) -> bool:
        """Whether the options carry positions, because some value cannot travel as an option's value."""
        fits = all(0 < len(v) <= OPTION_VALUE_MAX for v in self.values)
        return not fits or len(set(self.values)) < len(self.values)

    def option(self, index: int) -> Option:
        value = str(index) if self.by_position else self.values[index]
        return {"text": plain(self.titles[index], OPTION_TEXT_MAX), "value": value}

    def options(self) -> list[Option]:
        return [self.option(i) for i in range(len(self.values))]

    def chosen(self, values: list[Any]) -> list[Option]:
        """The options of these values (a default), in the schema's order."""
        wanted = {str(v) for v in values}
        return [self.option(i) for i, value in enumerate(self.values) if value in wanted]

    def value_of(self, option_value: str) -> str:
        """The exact value an option stands for. One that stands for none is returned as it came, for the schema
        check to refuse by name."""
        if not self.by_position:
            return option_value
        if option_value.isdigit() and int(option_value) < len(self.values):
            return self.values[int(option_value)]
        return option_value

    def matching(self, typed: str) -> list[Option]:
        """The first 100 options whose title or value contains what the person typed (any case)."""
        needle = typed.strip().casefold()
        found = [
            i
            for i, (value, title) in enumerate(zip(self.values, self.titles, strict=True))
            if needle in title.casefold() or needle in value.casefold()
        ]
        return [self.option(i) for i in found[:MAX_OPTIONS]]
