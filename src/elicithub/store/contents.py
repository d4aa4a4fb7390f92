"""Everything a store holds, in one form whatever the backend: what `elicithub store copy` reads out of one store and
writes into another.

There is a record kind per port of `core.ports` (a question, a run, a conversation with its messages, an event log,
a key-value entry, a list of expiring entries), each as its backend stores it, so a copy carries it byte for byte
(a sealed token stays sealed under the same master key). Each durable backend has a `contents` module that reads
and writes these, and names every table or key kind it has, copied or not: a table, column or key it does not know
stops a copy instead of being left behind unseen (tests/store/test_contents.py holds each module to its schema).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import Entry

BATCH = 500
"""Records read, and written, at a time."""


@dataclass(frozen=True)
class StoredElicitation:
    data: JsonObject
    """`Elicitation.to_json()`: a pending question keeps its deadline, an ended one its end."""

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def pending(self) -> bool:
        return bool(self.data["state"] == "pending")

    @property
    def expires_at(self) -> float:
        return datetime.fromisoformat(self.data["expires_at"]).timestamp()

    @property
    def resolved_at(self) -> float | None:
        at = self.data.get("resolved_at")
        return None if at is None else datetime.fromisoformat(at).timestamp()


@dataclass(frozen=True)
class StoredRun:
    data: JsonObject
    """`RunRecord.to_json()` as stored (its own messages, after its conversation's `history`), with its owner."""

    @property
    def id(self) -> str:
        return str(self.data["run_id"])

    @property
    def finished(self) -> bool:
        return bool(self.data["status"] == "finished")


@dataclass(frozen=True)
class StoredConversation:
    key: str
    data: JsonObject
    """`ConversationRecord.to_json()` as stored, with its version (a record of an earlier form: its messages too)."""
    messages: list[str]
    """Its messages kept apart, in order, each as JSON text."""

    @property
    def version(self) -> int:
        return int(self.data["version"])

    @property
    def active(self) -> bool:
        return self.data.get("active_run_id") is not None

    @property
    def updated_at(self) -> float:
        return float(self.data.get("updated_at", 0.0))


@dataclass(frozen=True)
class StoredLog:
    key: str
    last: int
    """The newest sequence number given out: the next append numbers itself after it."""
    events: list[tuple[int, str]]
    """The events kept, oldest first: their sequence numbers (which readers' `Last-Event-ID`s name) and JSON texts."""


@dataclass(frozen=True)
class StoredValue:
    key: str
    value: bytes
    expires_at: float | None
    """Unix seconds; None: kept until deleted."""


@dataclass(frozen=True)
class StoredList:
    key: str
    entries: list[Entry]
    """Not yet expired, in any order."""


StoredRecord = StoredElicitation | StoredRun | StoredConversation | StoredLog | StoredValue | StoredList

KINDS: dict[type[StoredRecord], str] = {
    StoredElicitation: "questions",
    StoredRun: "runs",
    StoredConversation: "conversations",
    StoredLog: "event logs",
    StoredValue: "key-value entries",
    StoredList: "lists",
}
"""Each kind as a person counts it."""


class Contents(Protocol):
    """One store's records, read and written whole; made by `store.copy.open_contents`."""

    async def check(self) -> None:
        """Raise StoreUnusable when the store holds something this module does not know how to copy, has a schema
        other than this elicithub's, or a hub is still using it. From here on `count` and `read` see the store as
        it is now, where it can hold a moment (SQLite, Postgres)."""

    async def count(self) -> int:
        """How many records `read` yields (as the store is now)."""

    def read(self) -> AsyncIterator[Sequence[StoredRecord]]:
        """Every record, in batches of about BATCH."""

    async def held(self) -> str | None:
        """None when the store holds nothing of a hub's; else what it holds, in words ("3 rows in runs")."""

    async def write(self, records: Sequence[StoredRecord]) -> None:
        """Store these records, as a hub of this version would have stored them."""

    async def close(self) -> None: ...


def unknown(kinds: Sequence[str], where: str) -> str:
    """The reason a copy stops on `kinds` found in the store `where` that no `contents` module knows."""
    return (
        f"the store {where} holds {', '.join(sorted(kinds))}, which this elicithub does not know how to copy: "
        "copy it with the elicithub version whose hubs wrote it"
    )


def batched(records: Iterable[StoredRecord]) -> Iterator[list[StoredRecord]]:
    """`records` in lists of BATCH (the last one shorter)."""
    batch: list[StoredRecord] = []
    for record in records:
        batch.append(record)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
