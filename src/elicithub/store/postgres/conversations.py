"""The Postgres backend's conversations: written by compare-and-set on their version; a purge takes their event
logs with them."""

from __future__ import annotations

import json

from elicithub.core.runs import ConversationRecord
from elicithub.store.postgres.db import PostgresDb, rows
from elicithub.store.postgres.schema import PURGE_BATCH

GET = "SELECT data FROM elicithub_conversations WHERE key = $1"
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
), events AS (
    DELETE FROM elicithub_events WHERE key IN (SELECT key FROM gone)
), logs AS (
    DELETE FROM elicithub_event_logs WHERE key IN (SELECT key FROM gone)
)
SELECT count(*) FROM gone
"""


class PostgresConversations:
    def __init__(self, db: PostgresDb) -> None:
        self._db = db

    async def get(self, key: str) -> ConversationRecord | None:
        pool = await self._db.pool()
        data = await pool.fetchval(GET, key)
        return None if data is None else ConversationRecord.from_json(json.loads(data))

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        pool = await self._db.pool()
        row = (
            record.key,
            record.version,
            record.active_run_id is not None,
            record.updated_at,
            json.dumps(record.to_json(), separators=(",", ":")),
        )
        if expected_version is None:
            status = await pool.execute(CREATE, *row)
        else:
            status = await pool.execute(UPDATE, *row, expected_version)
        return rows(status) == 1

    async def purge(self, idle_before: float) -> int:
        pool = await self._db.pool()
        count = 0
        while True:
            deleted = int(await pool.fetchval(PURGE, idle_before, PURGE_BATCH))
            count += deleted
            if deleted < PURGE_BATCH:
                return count
