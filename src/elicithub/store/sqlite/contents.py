"""The SQLite file's whole content for `elicithub store copy` (see store/contents.py). A source is opened read-only
and read in one transaction, so what is copied is one moment of the file; a target gets this version's tables and
one transaction per batch. The calls block: a copy is the one thing its process does."""

from __future__ import annotations

import itertools
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from elicithub.core.jsoncodec import dumps
from elicithub.core.ports import Entry
from elicithub.errors import StoreUnusable
from elicithub.store.contents import (
    StoredConversation,
    StoredElicitation,
    StoredList,
    StoredLog,
    StoredRecord,
    StoredRun,
    StoredValue,
    batched,
    unknown,
)
from elicithub.store.sqlite.schema import SCHEMA

TABLES: dict[str, tuple[str, ...]] = {
    "elicitations": ("id", "state", "expires_at", "resolved_at", "data"),
    "runs": ("run_id", "status", "owner", "updated_at", "data"),
    "conversations": ("key", "version", "active", "updated_at", "data"),
    "conversation_messages": ("key", "pos", "data"),
    "events": ("key", "seq", "data"),
    "vault": ("key", "value", "expires_at"),
    "kv_entries": ("key", "expires_ms", "value"),
    "kv_holds": ("key", "member", "expires_ms"),
}
"""Every table of the file with its columns, each copied but the limits' counts (`kv_holds`), which start over on the
new store: a hub alone on its file keeps nothing else that lives only as long as the hub (no heartbeats, no leases).
Files of earlier versions may lack the newer tables."""


class SqliteContents:
    def __init__(self, path: Path, *, target: bool) -> None:
        self._where = str(path)
        if target:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, isolation_level=None)
            self._db.executescript(SCHEMA)
        else:
            if not path.is_file():
                raise StoreUnusable(f"there is no SQLite store at {path}")
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
        self._tables = set(self._schema())
        self._now = time.time()

    def _schema(self) -> dict[str, tuple[str, ...]]:
        names = self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        return {
            name: tuple(column[1] for column in self._db.execute(f'PRAGMA table_info("{name}")'))
            for (name,) in names.fetchall()
        }

    async def check(self) -> None:
        found = self._schema()
        strange = [t for t in found if t not in TABLES] + [
            f"{t}.{c}" for t, columns in found.items() if t in TABLES for c in columns if c not in TABLES[t]
        ]
        if strange:
            raise StoreUnusable(unknown(strange, self._where))
        self._tables = set(found)
        self._db.execute("BEGIN")  # one read transaction from here on: count and read see the same file
        self._now = time.time()

    def _rows(self, table: str, sql: str, *args: Any) -> Iterable[Any]:
        """`sql`'s rows, none when the file predates `table`."""
        return self._db.execute(sql, args) if table in self._tables else ()

    def _one(self, table: str, sql: str, *args: Any) -> int:
        return next(iter(self._rows(table, sql, *args)), (0,))[0] or 0

    async def count(self) -> int:
        return (
            self._one("elicitations", "SELECT count(*) FROM elicitations")
            + self._one("runs", "SELECT count(*) FROM runs")
            + self._one("conversations", "SELECT count(*) FROM conversations")
            + self._one("events", "SELECT count(DISTINCT key) FROM events")
            + self._one("vault", "SELECT count(*) FROM vault WHERE expires_at IS NULL OR expires_at > ?", self._now)
            + self._one("kv_entries", "SELECT count(DISTINCT key) FROM kv_entries WHERE expires_ms > ?", self._now_ms)
        )

    @property
    def _now_ms(self) -> int:
        return int(self._now * 1000)

    async def read(self) -> AsyncIterator[Sequence[StoredRecord]]:
        for batch in batched(self._records()):
            yield batch

    def _records(self) -> Iterator[StoredRecord]:
        for (data,) in self._rows("elicitations", "SELECT data FROM elicitations ORDER BY id"):
            yield StoredElicitation(json.loads(data))
        for owner, data in self._rows("runs", "SELECT owner, data FROM runs ORDER BY run_id"):
            yield StoredRun({**json.loads(data), "owner": owner})
        for key, data in self._rows("conversations", "SELECT key, data FROM conversations ORDER BY key"):
            messages = self._rows(
                "conversation_messages", "SELECT data FROM conversation_messages WHERE key = ? ORDER BY pos", key
            )
            yield StoredConversation(key, json.loads(data), [m for (m,) in messages])
        for (key,) in list(self._rows("events", "SELECT DISTINCT key FROM events ORDER BY key")):
            kept = self._db.execute("SELECT seq, data FROM events WHERE key = ? ORDER BY seq", (key,))
            events = [(int(seq), data) for seq, data in kept]
            yield StoredLog(key, events[-1][0], events)
        for key, value, expires_at in self._rows(
            "vault",
            "SELECT key, value, expires_at FROM vault WHERE expires_at IS NULL OR expires_at > ? ORDER BY key",
            self._now,
        ):
            yield StoredValue(key, bytes(value), expires_at)
        entries = self._rows(
            "kv_entries",
            "SELECT key, expires_ms, value FROM kv_entries WHERE expires_ms > ? ORDER BY key",
            self._now_ms,
        )
        for key, rows in itertools.groupby(entries, key=lambda row: str(row[0])):
            yield StoredList(key, [Entry(int(expires_ms), value) for _, expires_ms, value in rows])

    async def held(self) -> str | None:
        counts = {name: self._db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in self._schema()}
        found = [f"{count} rows in {name}" for name, count in counts.items() if count]
        return ", ".join(found) or None

    async def write(self, records: Sequence[StoredRecord]) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            for record in records:
                _write(db, record)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    async def close(self) -> None:
        self._db.close()


def _write(db: sqlite3.Connection, record: StoredRecord) -> None:
    if isinstance(record, StoredElicitation):
        row = (record.id, record.data["state"], record.expires_at, record.resolved_at, dumps(record.data))
        db.execute("INSERT INTO elicitations (id, state, expires_at, resolved_at, data) VALUES (?, ?, ?, ?, ?)", row)
    elif isinstance(record, StoredRun):
        data = record.data
        row = (record.id, data["status"], data["owner"], data["updated_at"], dumps(data))
        db.execute("INSERT INTO runs (run_id, status, owner, updated_at, data) VALUES (?, ?, ?, ?, ?)", row)
    elif isinstance(record, StoredConversation):
        row = (record.key, record.version, int(record.active), record.updated_at, dumps(record.data))
        db.execute("INSERT INTO conversations (key, version, active, updated_at, data) VALUES (?, ?, ?, ?, ?)", row)
        db.executemany(
            "INSERT INTO conversation_messages (key, pos, data) VALUES (?, ?, ?)",
            [(record.key, pos, message) for pos, message in enumerate(record.messages)],
        )
    elif isinstance(record, StoredLog):
        # The file numbers a log's next event after its newest kept one, which is the log's last.
        db.executemany(
            "INSERT INTO events (key, seq, data) VALUES (?, ?, ?)", [(record.key, s, d) for s, d in record.events]
        )
    elif isinstance(record, StoredValue):
        db.execute(
            "INSERT INTO vault (key, value, expires_at) VALUES (?, ?, ?)", (record.key, record.value, record.expires_at)
        )
    else:
        db.executemany(
            "INSERT INTO kv_entries (key, expires_ms, value) VALUES (?, ?, ?)",
            [(record.key, entry.expires_ms, entry.value) for entry in record.entries],
        )
