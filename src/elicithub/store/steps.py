"""The steps every store backend takes the same way, written once: a run read with the history its caller already
holds, and a purge in batches."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Message, RunRecord

PURGE_BATCH = 2000
"""Rows one purge statement deletes at most. SQLite's runs on the event loop, so a backlog goes a batch per sweep
(every few s); PostgreSQL's go batch after batch, so a backlog never holds locks on many rows at once."""


def history_of(data: JsonObject) -> int:
    """How many of its conversation's first messages a stored run's history is."""
    return int(data.get("history", 0))


def run_without_reading(data: JsonObject, *, messages: bool, known: Sequence[Message]) -> RunRecord | None:
    """The stored run `data` when its messages need no reading: without them when they are not asked for, or with
    its history sliced from `known` (the conversation's first messages, as the caller holds them) when that has
    them all. None when the backend must read the first `history_of(data)` messages itself."""
    if not messages:
        return RunRecord.from_json(data, messages=False)
    count = history_of(data)
    return RunRecord.from_json(data, known[:count]) if len(known) >= count else None


async def purge_in_batches(delete_batch: Callable[[int], Awaitable[int]]) -> int:
    """`delete_batch(limit)` of at most PURGE_BATCH rows, again until a batch comes back short; how many rows went."""
    count = 0
    while True:
        deleted = await delete_batch(PURGE_BATCH)
        count += deleted
        if deleted < PURGE_BATCH:
            return count
