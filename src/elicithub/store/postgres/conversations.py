"""The Postgres backend's conversations: written by compare-and-set on their version, their messages one row each
(added by the same statement); a purge takes their messages and event logs with them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from elicithub.core.ports import Added
from elicithub.core.runs import ConversationRecord, Message, RunRecord, conversation_key
from elicithub.store.postgres.db import PostgresDb
from elicithub.store.steps import purge_in_batches

GET = """
SELECT c.data, (SELECT coalesce(max(m.pos) + 1, 0) FROM elicithub_conversation_messages m WHERE m.key = $1)
FROM elicithub_conversations c WHERE c.key = $1
"""
# Locked first, then counted: a statement sees what was committed before it began, and the count's statement begins
# once the lock is held (the row's own statement may have begun before its last writer committed).
LOCKED = "SELECT data FROM elicithub_conversations WHERE key = $1 FOR UPDATE"
COUNT = "SELECT coalesce(max(pos) + 1, 0) FROM elicithub_conversation_messages WHERE key = $1"
LAST = "SELECT last FROM elicithub_event_logs WHERE key = $1"
GET_WITH_MESSAGES = """
SELECT c.data,
    (SELECT coalesce(json_agg(m.data ORDER BY m.pos), '[]') FROM elicithub_conversation_messages m WHERE m.key = $1)
FROM elicithub_conversations c WHERE c.key = $1
"""
HISTORY = """
SELECT coalesce(json_agg(data ORDER BY pos), '[]') FROM elicithub_conversation_messages WHERE key = $1 AND pos < $2
"""
CREATE = """
INSERT INTO elicithub_conversations (key, version, active, updated_at, data) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (key) DO NOTHING
"""
UPDATE = """
UPDATE elicithub_conversations SET version = $2, active = $3, updated_at = $4, data = $5
WHERE key = $1 AND version = $6
"""
PURGE = """
WITH gone AS (
    DELETE FROM elicithub_conversations WHERE key IN (
        SELECT key FROM elicithub_conversations WHERE NOT active AND updated_at < $1 LIMIT $2
    )
    RETURNING key
), messages AS (
    DELETE FROM elicithub_conversation_messages WHERE key IN (SELECT key FROM gone)
), events AS (
    DELETE FROM elicithub_events WHERE key IN (SELECT key FROM gone)
), logs AS (
    DELETE FROM elicithub_event_logs WHERE key IN (SELECT key FROM gone)
)
SELECT count(*) FROM gone
"""


def with_messages(write: str, stored: int, messages: int) -> str:
    """`write` (of the conversation's row), and only if it wrote a row, its messages from position `$stored` on (the
    JSON texts of parameter `$messages`): the list then holds exactly the first `stored` and those. Rows past them
    are not this conversation's (it was read with its messages inline, in a row of step 1, or is new)."""
    return f"""
WITH written AS ({write} RETURNING key), gone AS (
    DELETE FROM elicithub_conversation_messages m USING written w
    WHERE m.key = w.key AND m.pos >= ${stored} + cardinality(${messages}::jsonb[])
), added AS (
    INSERT INTO elicithub_conversation_messages (key, pos, data)
    SELECT w.key, ${stored} + t.n - 1, t.data FROM written w, unnest(${messages}::jsonb[]) WITH ORDINALITY t(data, n)
    ON CONFLICT (key, pos) DO UPDATE SET data = excluded.data
)
SELECT count(*) FROM written
"""


CREATE_WITH_MESSAGES = with_messages(CREATE, 6, 7)
UPDATE_WITH_MESSAGES = with_messages(UPDATE, 7, 8)


Connection = asyncpg.Connection | PoolConnectionProxy


async def write(
    db: asyncpg.Pool | Connection,
    record: ConversationRecord,
    expected_version: int | None,
    added: Sequence[Message],
) -> bool:
    """`ConversationStore.put`, adding `added` after the `record.stored` messages."""
    row = (
        record.key,
        record.version,
        record.active_run_id is not None,
        record.updated_at,
        json.dumps(record.to_json(), separators=(",", ":")),
    )
    messages = [json.dumps(m, separators=(",", ":")) for m in added]
    if expected_version is None:
        written = await db.fetchval(CREATE_WITH_MESSAGES, *row, record.stored, messages)
    else:
        written = await db.fetchval(UPDATE_WITH_MESSAGES, *row, expected_version, record.stored, messages)
    return int(written) == 1


async def commit(connection: Connection, run: RunRecord) -> int | None:
    """`RunStore.finish`'s commit of `run` to its conversation (see there), in the transaction of `connection`."""
    key = conversation_key(run.user_id, run.conversation_id)
    text = await connection.fetchval(LOCKED, key)
    if text is None:
        return None
    data = json.loads(text)
    stored = await connection.fetchval(COUNT, key)
    if "messages" in data or data["active_run_id"] != run.run_id or stored < run.history:
        return None
    current = ConversationRecord.from_json(data, stored=stored)
    done = replace(current, active_run_id=None, version=current.version + 1, updated_at=run.updated_at)
    if not await write(connection, done, current.version, run.messages[stored:]):
        raise RuntimeError(f"conversation {key} changed under its lock")  # not with a row lock held
    return done.version


class PostgresConversations:
    ordered = False  # a pool: statements of one turn race

    def __init__(self, db: PostgresDb) -> None:
        self._db = db

    async def get(self, key: str, *, messages: bool = True) -> ConversationRecord | None:
        pool = await self._db.pool()
        row = await pool.fetchrow(GET_WITH_MESSAGES if messages else GET, key)
        if row is None:
            return None
        data = json.loads(row[0])
        if messages:
            kept = json.loads(row[1])
            return ConversationRecord.from_json(data, kept, len(kept))
        return ConversationRecord.from_json(data, stored=row[1])

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        pool = await self._db.pool()
        return await write(pool, record, expected_version, record.messages[record.stored :])

    async def send(self, record: ConversationRecord) -> Added | None:
        pool = await self._db.pool()
        async with pool.acquire() as connection, connection.transaction():
            while (text := await connection.fetchval(LOCKED, record.key)) is None:
                written = replace(record, version=1, active_run_after=0, stored=0)
                if await write(connection, written, None, record.messages):
                    return Added(None, replace(written, messages=[], stored=len(record.messages)))
                # Another writer made it meanwhile: read it, waiting until that writer commits.
            data = json.loads(text)
            if "messages" in data:
                return None
            stored = await connection.fetchval(COUNT, record.key)
            previous = ConversationRecord.from_json(data, stored=stored)
            after = await connection.fetchval(LAST, record.key) or 0
            written = replace(record, version=previous.version + 1, active_run_after=after, stored=stored)
            if not await write(connection, written, previous.version, record.messages[-1:]):
                raise RuntimeError(f"conversation {record.key} changed under its lock")  # not with a row lock held
            return Added(previous, replace(written, messages=[], stored=stored + 1))

    async def purge(self, idle_before: float) -> int:
        pool = await self._db.pool()

        async def delete_batch(limit: int) -> int:
            return int(await pool.fetchval(PURGE, idle_before, limit))

        return await purge_in_batches(delete_batch)
