"""The messages of conversations this hub wrote or read last, so the next message in one reads only its record; and
`send`'s write of a message, which they complete."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from elicithub.core.ports import Added, Backend
from elicithub.core.runs import ConversationRecord, Message

MAX_MESSAGES = 20_000
"""Messages kept in all (a few MB): the least recently used conversations are forgotten first, and those idle past
the conversations' retention at each purge (`forget_idle`)."""


class Histories:
    """Each conversation's messages as of one write, under that write's version and time: a record read later with
    the same two is that write (a version alone could be a new conversation's under a purged one's key), so its
    messages are these. Anything else reads them from the store again."""

    def __init__(self, max_messages: int = MAX_MESSAGES) -> None:
        self._kept: OrderedDict[str, tuple[int, float, list[Message]]] = OrderedDict()
        self._count = 0
        self._max = max_messages

    def __len__(self) -> int:
        """Conversations whose messages are held."""
        return len(self._kept)

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

    def forget_idle(self, idle_before: float) -> None:
        """Let go of the conversations not written since `idle_before` (unix seconds): what this hub holds of one
        lasts no longer than the store keeps it (one still kept, with a run going on, is read again if needed)."""
        for key in [key for key, (_, updated_at, _) in self._kept.items() if updated_at < idle_before]:
            self._forget(key)

    def _forget(self, key: str) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self._count -= len(kept[2])


async def add_message(
    backend: Backend, histories: Histories, new: ConversationRecord, count: int = 1
) -> tuple[ConversationRecord, str | None]:
    """`send`'s write (`ConversationStore.send`, `new` as it takes it): the conversation as written, with all its
    messages (the store's, unless `histories` holds them), and the run it superseded. Seen by `histories`. `count`:
    how many of `new`'s last messages are added (the results of several calls its client made go in one write)."""
    added = await backend.conversations.send(new) if count == 1 else None
    if added is None:  # several, or stored in an earlier form: read and written by compare-and-set
        return await _put_message(backend, histories, new, count)
    record = replace(added.written, messages=await _messages(backend, histories, added, new))
    histories.saw(record)
    return record, added.previous.active_run_id if added.previous is not None else None


async def _messages(backend: Backend, histories: Histories, added: Added, new: ConversationRecord) -> list[Message]:
    if added.previous is None:
        return new.messages
    known = histories.with_messages(added.previous)
    if known is not None:
        return [*known.messages, new.messages[-1]]
    read = await backend.conversations.get(new.key)
    return [] if read is None else read.messages[: added.written.stored]


async def _put_message(
    backend: Backend, histories: Histories, new: ConversationRecord, count: int
) -> tuple[ConversationRecord, str | None]:
    while True:
        current = await _with_messages(backend, histories, new.key)
        base = current or replace(new, messages=new.messages[:-count], active_run_id=None)
        # A new conversation's log is read from its start: any position before the run's first event will do
        # (readers skip other runs' events), so one unknown to the store needs no read of its length.
        after = 0 if current is None else await backend.events.last(new.key)
        record = replace(
            base,
            messages=[*base.messages, *new.messages[-count:]],
            active_run_id=new.active_run_id,
            active_run_after=after,
            version=base.version + 1,
            updated_at=new.updated_at,
        )
        if await backend.conversations.put(record, None if current is None else current.version):
            histories.saw(record)
            return record, None if current is None else current.active_run_id


async def _with_messages(backend: Backend, histories: Histories, key: str) -> ConversationRecord | None:
    """The conversation with all its messages: those `histories` holds if it is as this hub last saw it."""
    light = await backend.conversations.get(key, messages=False)
    if light is None:
        return None
    known = histories.with_messages(light)
    if known is not None:
        return known
    read = await backend.conversations.get(key)
    if read is not None:
        histories.saw(read)
    return read
