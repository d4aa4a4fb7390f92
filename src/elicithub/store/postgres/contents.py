"""The Postgres store's whole content for `elicithub store copy` (see store/contents.py). A source is read in one
read-only, repeatable-read transaction, so what is copied is one moment of the database; a target gets this
version's schema and one transaction per batch."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg

from elicithub.core.jsoncodec import dumps
from elicithub.core.ports import Entry
from elicithub.errors import StoreUnusable
from elicithub.store.contents import (
    BATCH,
    StoredConversation,
    StoredElicitation,
    StoredList,
    StoredLog,
    StoredRecord,
    StoredRun,
    StoredValue,
    unknown,
)
from elicithub.store.postgres.schema import LATEST, migrate, version

TABLES: dict[str, tuple[str, ...]] = {
    "elicithub_elicitations": ("id", "state", "expires_at", "resolved_at", "data", "waiters"),
    "elicithub_runs": ("run_id", "status", "owner", "updated_at", "data"),
    "elicithub_instances": ("owner", "alive_until"),
    "elicithub_conversations": ("key", "version", "active", "updated_at", "data"),
    "elicithub_conversation_messages": ("key", "pos", "data"),
    "elicithub_event_logs": ("key", "last"),
    "elicithub_events": ("key", "seq", "data"),
    "elicithub_kv": ("key", "value", "expires_at"),
    "elicithub_kv_entries": ("key", "expires_ms", "value"),
    "elicithub_kv_holds": ("key", "member", "expires_ms"),
    "elicithub_migrations": ("version", "applied_at"),
}
"""Every table of the schema with its columns. All are copied but what belongs to hubs, which are stopped: their
heartbeats (`elicithub_instances`) and the channels they listened on for a question's end (`waiters`; a hub on the
target that waits on one names its own); and the limits' counts (`elicithub_kv_holds`), which start over on the new
store. The target has schema steps of its own (`elicithub_migrations`)."""

_COLUMNS = """
SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name LIKE 'elicithub\\_%'
"""
_BEATING = "alive_until > extract(epoch FROM clock_timestamp())"
_ALIVE = f"SELECT owner FROM elicithub_instances WHERE {_BEATING}"

_COUNT = """
SELECT (SELECT count(*) FROM elicithub_elicitations) + (SELECT count(*) FROM elicithub_runs)
    + (SELECT count(*) FROM elicithub_conversations) + (SELECT count(*) FROM elicithub_event_logs)
    + (SELECT count(*) FROM elicithub_kv WHERE expires_at IS NULL OR expires_at > $1)
    + (SELECT count(DISTINCT key) FROM elicithub_kv_entries WHERE expires_ms > $2)
"""
_ELICITATIONS = "SELECT data FROM elicithub_elicitations ORDER BY id"
_RUNS = "SELECT owner, data FROM elicithub_runs ORDER BY run_id"
_CONVERSATIONS = "SELECT key, data FROM elicithub_conversations ORDER BY key"
_MESSAGES = "SELECT key, data FROM elicithub_conversation_messages WHERE key = ANY($1) ORDER BY key, pos"
_LOGS = "SELECT key, last FROM elicithub_event_logs ORDER BY key"
_EVENTS = "SELECT key, seq, data FROM elicithub_events WHERE key = ANY($1) ORDER BY key, seq"
_VALUES = "SELECT key, value, expires_at FROM elicithub_kv WHERE expires_at IS NULL OR expires_at > $1 ORDER BY key"
_LISTS = "SELECT DISTINCT key FROM elicithub_kv_entries WHERE expires_ms > $1 ORDER BY key"
_ENTRIES = "SELECT key, expires_ms, value FROM elicithub_kv_entries WHERE key = ANY($1) AND expires_ms > $2"

LOGS_AT_ONCE = 20
"""Event logs read in one statement: each keeps up to `conversations.max_events` events."""


async def open_postgres_contents(url: str, *, target: bool) -> PostgresContents:
    try:
        connection = await asyncpg.connect(url, server_settings={"application_name": "elicithub store copy"})
    except (OSError, asyncpg.PostgresError) as exc:
        raise StoreUnusable(f"cannot connect to the Postgres store: {exc}") from exc
    try:
        if target:
            await migrate(connection)
        return PostgresContents(connection)
    except BaseException:
        await connection.close()
        raise


class PostgresContents:
    def __init__(self, connection: asyncpg.Connection) -> None:
        self._db = connection
        self._now = time.time()

    async def check(self) -> None:
        reached = await version(self._db)
        if reached != LATEST:
            raise StoreUnusable(
                f"the Postgres store's schema is at version {reached}, this elicithub's at {LATEST}: bring it to "
                "this version first (`elicithub store migrate`), or copy with the elicithub version that wrote it"
            )
        strange = {
            table if table not in TABLES else f"{table}.{column}"
            for table, column in await self._db.fetch(_COLUMNS)
            if column not in TABLES.get(table, ())
        }
        if strange:
            raise StoreUnusable(unknown(sorted(strange), "on Postgres"))
        alive = [row["owner"] for row in await self._db.fetch(_ALIVE)]
        if alive:
            raise StoreUnusable(f"hubs still use the store (instances {', '.join(alive)}): stop every hub first")
        # One moment of the database from here on: count and read see the same rows.
        self._reading = self._db.transaction(isolation="repeatable_read", readonly=True)
        await self._reading.start()
        self._now = time.time()

    async def count(self) -> int:
        return int(await self._db.fetchval(_COUNT, self._now, int(self._now * 1000)))

    async def read(self) -> AsyncIterator[Sequence[StoredRecord]]:
        async for rows in self._pages(_ELICITATIONS):
            yield [StoredElicitation(json.loads(row["data"])) for row in rows]
        async for rows in self._pages(_RUNS):
            yield [StoredRun({**json.loads(row["data"]), "owner": row["owner"]}) for row in rows]
        async for rows in self._pages(_CONVERSATIONS):
            messages = _grouped(await self._db.fetch(_MESSAGES, [row["key"] for row in rows]), "data")
            yield [StoredConversation(r["key"], json.loads(r["data"]), messages.get(r["key"], [])) for r in rows]
        async for rows in self._pages(_LOGS, size=LOGS_AT_ONCE):
            events = _grouped(await self._db.fetch(_EVENTS, [row["key"] for row in rows]), "seq", "data")
            yield [StoredLog(row["key"], int(row["last"]), events.get(row["key"], [])) for row in rows]
        async for rows in self._pages(_VALUES, self._now):
            yield [StoredValue(row["key"], bytes(row["value"]), row["expires_at"]) for row in rows]
        now_ms = int(self._now * 1000)
        async for rows in self._pages(_LISTS, now_ms):
            found = await self._db.fetch(_ENTRIES, [row["key"] for row in rows], now_ms)
            entries = _grouped(found, "expires_ms", "value")
            yield [StoredList(row["key"], [Entry(*entry) for entry in entries.get(row["key"], [])]) for row in rows]

    async def _pages(self, sql: str, *args: Any, size: int = BATCH) -> AsyncIterator[list[asyncpg.Record]]:
        cursor = await self._db.cursor(sql, *args)
        while rows := await cursor.fetch(size):
            yield rows

    async def held(self) -> str | None:
        tables = sorted({row["table_name"] for row in await self._db.fetch(_COLUMNS)} - {"elicithub_migrations"})
        found = []
        for table in tables:
            # A hub that ran here and stopped leaves its last heartbeat, which holds nothing; a live one counts.
            live = f" WHERE {_BEATING}" if table == "elicithub_instances" else ""
            count = await self._db.fetchval(f'SELECT count(*) FROM "{table}"{live}')
            if count:
                found.append(f"{count} rows in {table}")
        return ", ".join(found) or None

    async def write(self, records: Sequence[StoredRecord]) -> None:
        rows: dict[str, list[tuple[Any, ...]]] = {sql: [] for sql in _INSERTS}
        for record in records:
            for sql, row in _rows(record):
                rows[sql].append(row)
        async with self._db.transaction():
            for sql, written in rows.items():
                if written:
                    await self._db.executemany(sql, written)

    async def close(self) -> None:
        await self._db.close()


_ELICITATION = """
INSERT INTO elicithub_elicitations (id, state, expires_at, resolved_at, data) VALUES ($1, $2, $3, $4, $5)
"""
_RUN = "INSERT INTO elicithub_runs (run_id, status, owner, updated_at, data) VALUES ($1, $2, $3, $4, $5)"
_CONVERSATION = """
INSERT INTO elicithub_conversations (key, version, active, updated_at, data) VALUES ($1, $2, $3, $4, $5)
"""
_MESSAGE = "INSERT INTO elicithub_conversation_messages (key, pos, data) VALUES ($1, $2, $3)"
_LOG = "INSERT INTO elicithub_event_logs (key, last) VALUES ($1, $2)"
_EVENT = "INSERT INTO elicithub_events (key, seq, data) VALUES ($1, $2, $3)"
_VALUE = "INSERT INTO elicithub_kv (key, value, expires_at) VALUES ($1, $2, $3)"
_ENTRY = "INSERT INTO elicithub_kv_entries (key, expires_ms, value) VALUES ($1, $2, $3)"
_INSERTS = (_ELICITATION, _RUN, _CONVERSATION, _MESSAGE, _LOG, _EVENT, _VALUE, _ENTRY)


def _rows(record: StoredRecord) -> list[tuple[str, tuple[Any, ...]]]:
    """The rows a record is stored as, each with its statement."""
    if isinstance(record, StoredElicitation):
        data = record.data
        return [(_ELICITATION, (record.id, data["state"], record.expires_at, record.resolved_at, dumps(data)))]
    if isinstance(record, StoredRun):
        data = record.data
        return [(_RUN, (record.id, data["status"], data["owner"], data["updated_at"], dumps(data)))]
    if isinstance(record, StoredConversation):
        row = (record.key, record.version, record.active, record.updated_at, dumps(record.data))
        return [(_CONVERSATION, row), *((_MESSAGE, (record.key, i, m)) for i, m in enumerate(record.messages))]
    if isinstance(record, StoredLog):
        return [(_LOG, (record.key, record.last)), *((_EVENT, (record.key, s, d)) for s, d in record.events)]
    if isinstance(record, StoredValue):
        return [(_VALUE, (record.key, record.value, record.expires_at))]
    return [(_ENTRY, (record.key, *entry)) for entry in record.entries]


def _grouped(rows: list[asyncpg.Record], *columns: str) -> dict[str, list[Any]]:
    """Rows by their `key`: each row's value of the one column, or a tuple of the columns."""
    grouped: dict[str, list[Any]] = {}
    for row in rows:
        value = row[columns[0]] if len(columns) == 1 else tuple(row[c] for c in columns)
        grouped.setdefault(row["key"], []).append(value)
    return grouped
