"""What a log line is about: the run, conversation and question being worked on, kept in a context variable that
follows the work across awaits and into the tasks it starts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType

NAMES = ("run_id", "conversation_id", "elicitation_id")
"""What a line may be about; a line may also name them itself (`extra=` of a logging call)."""

_fields: ContextVar[Mapping[str, str]] = ContextVar("elicithub_log_fields", default=MappingProxyType({}))


@contextmanager
def about(**fields: str | None) -> Iterator[None]:
    """Within the block, log lines name these (`run_id`, `conversation_id`, `elicitation_id`); None leaves one out."""
    token = _fields.set({**_fields.get(), **{k: v for k, v in fields.items() if v}})
    try:
        yield
    finally:
        _fields.reset(token)


def current() -> Mapping[str, str]:
    return _fields.get()
