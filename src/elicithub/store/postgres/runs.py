"""The Postgres backend's runs: one row each, taken over by compare-and-set on the owner, and the instances'
heartbeats, timed by the database's clock so hubs with skewed clocks agree on who is alive. The conversation's
messages a run started from are read from the conversation's own."""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Message, RunRecord, conversation_key
from elicithub.store.postgres.conversations import HISTORY, commit
from elicithub.store.postgres.db import PostgresDb, rows
from elicithub.store.steps import history_of, purge_in_batches, run_without_reading

SAVE = """
INSERT INTO elicithub_runs (run_id, status, owner, updated_at, data) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (run_id) DO UPDATE
SET status = excluded.status, owner = excluded.owner, updated_at = excluded.updated_at, data = excluded.data
"""
GET = "SELECT owner, data FROM elicithub_runs WHERE run_id = $1"
CLAIM = "UPDATE elicithub_runs SET owner = $3 WHERE run_id = $1 AND owner = $2"
# A random sample, as the Redis backend takes: over successive sweeps every unfinished run is looked at.
UNFINISHED = (
    "SELECT owner, data FROM elicithub_runs WHERE status <> 'finished' AND owner <> $1 ORDER BY random() LIMIT $2"
)
PURGE = """
DELETE FROM elicithub_runs WHERE run_id IN (
    SELECT run_id FROM elicithub_runs WHERE status = 'finished' AND updated_at < $1 LIMIT $2
)
"""
_NOW = "extract(epoch FROM clock_timestamp())::double precision"
HEARTBEAT = f"""
INSERT INTO elicithub_instances (owner, alive_until) VALUES ($1, {_NOW} + $2::double precision)
ON CONFLICT (owner) DO UPDATE SET alive_until = excluded.alive_until
"""
ALIVE = f"SELECT alive_until > {_NOW} FROM elicithub_instances WHERE owner = $1"
FORGET_GONE = f"DELETE FROM elicithub_instances WHERE alive_until < {_NOW} - 86400"


class PostgresRuns:
    """Runs shared by several hub instances; an instance that stops heart-beating loses its runs."""

    def __init__(self, db: PostgresDb) -> None:
        self._db = db

    async def save(self, record: RunRecord) -> None:
        pool = await self._db.pool()
        data = json.dumps(record.to_json(), separators=(",", ":"))
        await pool.execute(SAVE, record.run_id, record.status, record.owner, record.updated_at, data)

    async def finish(self, record: RunRecord) -> int | None:
        pool = await self._db.pool()
        data = json.dumps(record.to_json(), separators=(",", ":"))
        async with pool.acquire() as connection, connection.transaction():
            await connection.execute(SAVE, record.run_id, record.status, record.owner, record.updated_at, data)
            return await commit(connection, record)

    async def get(self, run_id: str, *, messages: bool = True, known: Sequence[Message] = ()) -> RunRecord | None:
        pool = await self._db.pool()
        row = await pool.fetchrow(GET, run_id)
        if row is None:
            return None
        data = _data(row)
        if (run := run_without_reading(data, messages=messages, known=known)) is not None:
            return run
        key = conversation_key(data["user_id"], data["conversation_id"])
        return RunRecord.from_json(data, json.loads(await pool.fetchval(HISTORY, key, history_of(data))))

    async def claim(self, run_id: str, expected_owner: str, owner: str) -> bool:
        pool = await self._db.pool()
        return rows(await pool.execute(CLAIM, run_id, expected_owner, owner)) == 1

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        pool = await self._db.pool()
        listed = await pool.fetch(UNFINISHED, other_than, limit)
        return [RunRecord.from_json(_data(row), messages=False) for row in listed]

    async def purge(self, finished_before: float) -> int:
        pool = await self._db.pool()

        async def delete_batch(limit: int) -> int:
            return rows(await pool.execute(PURGE, finished_before, limit))

        count = await purge_in_batches(delete_batch)
        await pool.execute(FORGET_GONE)
        return count

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        pool = await self._db.pool()
        await pool.execute(HEARTBEAT, owner, ttl_s)

    async def alive(self, owner: str) -> bool:
        pool = await self._db.pool()
        return bool(await pool.fetchval(ALIVE, owner))


def _data(row: asyncpg.Record) -> JsonObject:
    """The record's JSON with its owner: the owner column is the truth (a claim changes only it)."""
    data: JsonObject = json.loads(row["data"])
    return {**data, "owner": row["owner"]}
