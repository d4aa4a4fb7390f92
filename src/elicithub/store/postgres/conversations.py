"""The Postgres backend's conversations: written by compare-and-set on their version, their messages one row each
(added by the same statement); a purge takes their messages and event logs with them."""

from __future__ import annotations

import json

from elicithub.core.runs import ConversationRecord
from elicithub.store.postgres.db import PostgresDb
from elicithub.store.postgres.schema import PURGE_BATCH

GET = """
SELECT c.data, (SELECT coalesce(max(m.pos) + 1, 0) FROM elicithub_conversation_messages m WHERE m.key = $1)
FROM elicithub_conversations c WHERE c.key = $1
"""
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
        row = (
            record.key,
            record.version,
            record.active_run_id is not None,
            record.updated_at,
            json.dumps(record.to_json(), separators=(",", ":")),
        )
        added = [json.dumps(m, separators=(",", ":")) for m in record.messages[record.stored :]]
        if expected_version is None:
            written = await pool.fetchval(CREATE_WITH_MESSAGES, *row, record.stored, added)
        else:
            written = await pool.fetchval(UPDATE_WITH_MESSAGES, *row, expected_version, record.stored, added)
        return int(written) == 1

    async def purge(self, idle_before: float) -> int:
        pool = await self._db.pool()
        count = 0
        while True:
            deleted = int(await pool.fetchval(PURGE, idle_before, PURGE_BATCH))
            count += deleted
            if deleted < PURGE_BATCH:
                return count
