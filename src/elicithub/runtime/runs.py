"""Paused runs, persisted: enough to continue a conversation's run on any instance, after any restart."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from elicithub.core.broker import Broker, Resolution
from elicithub.core.elicitation import Elicitation
from elicithub.runtime.models import Message
from elicithub.store.sqlite import SqliteDb

Status = Literal["running", "paused", "finished"]


@dataclass(frozen=True)
class Pause:
    """Where a tool call stopped for input.

    `mrtr`: a 2026-07-28 call; retrying with `request_state` and the answers to `input_requests` continues it.
    `rerun`: a 2025-11-25 request or a sign-in; the call runs again from its start, and the questions it asked
    before are answered from the stored elicitations instead of being asked twice.
    """

    kind: Literal["mrtr", "rerun"]
    elicitation_ids: dict[str, str]  # inputRequests key (or position) -> elicitation id
    request_state: str | None = None
    input_requests: dict[str, Any] | None = None  # the round's inputRequests, as JSON
    rounds: int = 0


@dataclass(frozen=True)
class RunRecord:
    conversation_id: str
    user_id: str | None
    stream_id: str
    supports_elicitation: bool
    messages: list[Message]  # up to the assistant message whose tool calls are being made
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, arguments} of that message
    call_index: int = 0  # the call in progress; earlier ones have their results in `messages`
    pause: Pause | None = None
    status: Status = "running"
    owner: str = ""
    updated_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        pause = data.get("pause")
        return cls(**{**data, "pause": Pause(**pause) if pause else None})

    def with_(self, **changes: Any) -> RunRecord:
        return replace(self, updated_at=time.time(), **changes)


class RunStore(Protocol):
    async def save(self, record: RunRecord) -> None: ...

    async def get(self, conversation_id: str) -> RunRecord | None: ...

    async def claim(self, conversation_id: str, expected_owner: str, owner: str) -> bool:
        """Take over a run from `expected_owner` (compare-and-set): of several claimants exactly one wins."""

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        """Runs not finished, preferably of owners other than `other_than` (the caller itself)."""

    async def purge(self, finished_before: float) -> int:
        """Forget runs that finished before this time (unix seconds)."""

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        """Say that `owner` (a hub process) is alive for the next `ttl_s` seconds."""

    async def alive(self, owner: str) -> bool:
        """Whether another hub process still runs; its runs are taken over when it is not."""

    async def close(self) -> None: ...


class _SingleProcess:
    """Memory and SQLite runs belong to one hub process: any owner but the current one is gone (a restart)."""

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        return None

    async def alive(self, owner: str) -> bool:
        return False


class MemoryRuns(_SingleProcess):
    def __init__(self) -> None:
        self._items: dict[str, RunRecord] = {}

    async def save(self, record: RunRecord) -> None:
        self._items[record.conversation_id] = record

    async def get(self, conversation_id: str) -> RunRecord | None:
        return self._items.get(conversation_id)

    async def claim(self, conversation_id: str, expected_owner: str, owner: str) -> bool:
        record = self._items.get(conversation_id)
        if record is None or record.owner != expected_owner:
            return False
        self._items[conversation_id] = replace(record, owner=owner)
        return True

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        return [r for r in self._items.values() if r.status != "finished" and r.owner != other_than][:limit]

    async def purge(self, finished_before: float) -> int:
        old = [k for k, r in self._items.items() if r.status == "finished" and r.updated_at < finished_before]
        for key in old:
            del self._items[key]
        return len(old)

    async def close(self) -> None:
        self._items.clear()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    conversation_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    owner TEXT NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_unfinished ON runs (status);
"""


class SqliteRuns(_SingleProcess):
    def __init__(self, path: Path) -> None:
        self._file = SqliteDb(path, _SCHEMA)
        self._run = self._file.run

    async def save(self, record: RunRecord) -> None:
        row = (record.conversation_id, record.status, record.owner, record.updated_at, json.dumps(record.to_json()))
        await self._run(lambda db: db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?)", row))

    async def get(self, conversation_id: str) -> RunRecord | None:
        def read(db: sqlite3.Connection) -> Any:
            return db.execute("SELECT data FROM runs WHERE conversation_id = ?", (conversation_id,)).fetchone()

        row = await self._run(read)
        return None if row is None else RunRecord.from_json(json.loads(row[0]))

    async def claim(self, conversation_id: str, expected_owner: str, owner: str) -> bool:
        def cas(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT data FROM runs WHERE conversation_id = ? AND owner = ?", (conversation_id, expected_owner)
                ).fetchone()
                if row is None:
                    return False
                data = {**json.loads(row[0]), "owner": owner}
                db.execute(
                    "UPDATE runs SET owner = ?, data = ? WHERE conversation_id = ?",
                    (owner, json.dumps(data), conversation_id),
                )
                return True
            finally:
                db.execute("COMMIT")

        return await self._run(cas)

    async def purge(self, finished_before: float) -> int:
        def delete(db: sqlite3.Connection) -> int:
            cursor = db.execute("DELETE FROM runs WHERE status = 'finished' AND updated_at < ?", (finished_before,))
            return cursor.rowcount

        return await self._run(delete)

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        def read(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "SELECT data FROM runs WHERE status != 'finished' AND owner != ? LIMIT ?", (other_than, limit)
            ).fetchall()

        return [RunRecord.from_json(json.loads(row[0])) for row in await self._run(read)]

    async def close(self) -> None:
        await self._file.close()


def open_runs(store_url: str) -> RunStore:
    if store_url.startswith("sqlite:///"):
        return SqliteRuns(Path(store_url.removeprefix("sqlite:///")))
    if store_url.startswith("redis://"):
        from elicithub.runtime.redis_runs import RedisRuns

        return RedisRuns(store_url)
    return MemoryRuns()


class RunCheckpoint:
    """One tool call's checkpoint: saves the run when the call pauses, and replays answers after a restart."""

    def __init__(self, runs: RunStore, broker: Broker, record: RunRecord, resume: Pause | None = None) -> None:
        self.runs = runs
        self.broker = broker
        self.record = record
        self._resume = resume
        self._previous = list(resume.elicitation_ids.values()) if resume is not None else []
        self.paused = False

    async def pause(self, pause: Pause) -> None:
        self.record = self.record.with_(pause=pause, status="paused")
        await self.runs.save(self.record)
        self.paused = True

    def resume_from(self) -> Pause | None:
        resume, self._resume = self._resume, None
        return resume

    async def replay(self, elicitation: Elicitation) -> Resolution | None:
        for elicitation_id in list(self._previous):
            old = await self.broker.store.get(elicitation_id)
            if old is None:
                self._previous.remove(elicitation_id)
            elif (old.mode, old.message, old.requested_schema) == (
                elicitation.mode,
                elicitation.message,
                elicitation.requested_schema,
            ):
                self._previous.remove(elicitation_id)
                return await self.broker.wait(elicitation_id)
        return None
