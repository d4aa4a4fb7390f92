"""The messages of conversations this hub wrote or read last, so the next message in one reads only its record."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from elicithub.core.runs import ConversationRecord, Message

MAX_MESSAGES = 20_000
"""Messages kept in all (a few MB): the least recently used conversations are forgotten first."""


class Histories:
    """Each conversation's messages as of one write, under that write's version and time: a record read later with
    the same two is that write (a version alone could be a new conversation's under a purged one's key), so its
    messages are these. Anything else reads them from the store again."""

    def __init__(self, max_messages: int = MAX_MESSAGES) -> None:
        self._kept: OrderedDict[str, tuple[int, float, list[Message]]] = OrderedDict()
        self._count = 0
        self._max = max_messages

    def with_messages(self, light: ConversationRecord) -> ConversationRecord | None:
        """`light` (read without its messages) with the messages kept for it, or None when none are."""
        kept = self._kept.get(light.key)
        if kept is None or kept[:2] != (light.version, light.updated_at) or len(kept[2]) != light.stored:
            return None
        self._kept.move_to_end(light.key)
        return replace(light, messages=list(kept[2]))

    def first(self, key: str) -> list[Message]:
        """The conversation's messages as this hub last saw them, whatever its version since: messages are only
        appended, so these are its first ones (empty when none are kept). A paused run resumes from them."""
        kept = self._kept.get(key)
        return [] if kept is None else kept[2]

    def saw(self, record: ConversationRecord) -> None:
        """`record` was written or read with all its messages (else, with some left out, it is forgotten)."""
        self._forget(record.key)
        if len(record.messages) < record.stored or len(record.messages) > self._max:
            return
        self._kept[record.key] = (record.version, record.updated_at, list(record.messages))
        self._count += len(record.messages)
        while self._count > self._max:
            self._forget(next(iter(self._kept)))

    def _forget(self, key: str) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self._count -= len(kept[2])
