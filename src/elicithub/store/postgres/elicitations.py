"""The Postgres backend's elicitations: one row each, resolved by compare-and-set on the pending state.

Each client LISTENs on a channel of its own, and a pending row names the channels of the clients that wait on it
(`waiters`): the client that stores it, and any that `watch` it. The transition NOTIFYs the id on those channels in
the same statement, so a hub hears only the ends of the questions it waits on, not every hub's. The row lock orders
a watch against a transition: a watch that goes first is among the waiters the transition reads, one that waited
for the transition finds the question no longer pending.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator
from datetime import datetime

from elicithub.core.bus import EventBus
from elicithub.core.elicitation import Answer, Elicitation, State, resolved
from elicithub.store.postgres.db import PostgresDb, rows
from elicithub.store.steps import purge_in_batches

RESOLVED = "elicithub_resolved_"
"""How each client's NOTIFY channel begins (the rest is its own random part): the ids of elicitations it waits on
that reached their terminal state."""

PUT = "INSERT INTO elicithub_elicitations (id, state, expires_at, data, waiters) VALUES ($1, $2, $3, $4, ARRAY[$5])"
GET = "SELECT data FROM elicithub_elicitations WHERE id = $1"
GET_PENDING = "SELECT data FROM elicithub_elicitations WHERE id = $1 AND state = 'pending'"
# No row when the elicitation is missing or no longer pending (as of the latest row, after waiting for its lock).
WATCH = """
UPDATE elicithub_elicitations
SET waiters = CASE WHEN $2 = ANY(waiters) THEN waiters ELSE array_append(waiters, $2) END
WHERE id = $1 AND state = 'pending'
RETURNING data
"""
# Under READ COMMITTED a second writer of the row waits for the first, then finds it no longer pending: 0 rows. The
# waiters are those of the row as updated, so a watch that committed while this waited for the lock is among them.
# One row (the count of NOTIFYs) when this made the transition, whether anyone waits or not.
TRANSITION = """
WITH done AS (
    UPDATE elicithub_elicitations SET state = $2, resolved_at = $3, data = $4
    WHERE id = $1 AND state = 'pending'
    RETURNING id, waiters
)
SELECT (SELECT count(pg_notify(channel, id)) FROM unnest(waiters) AS channel) FROM done
"""
DUE = (
    "SELECT data FROM elicithub_elicitations WHERE state = 'pending' AND expires_at <= $1 ORDER BY expires_at LIMIT $2"
)
PURGE = """
DELETE FROM elicithub_elicitations WHERE id IN (
    SELECT id FROM elicithub_elicitations WHERE resolved_at IS NOT NULL AND resolved_at < $1 LIMIT $2
)
"""


class PostgresElicitations:
    def __init__(self, db_or_url: PostgresDb | str) -> None:
        self._db = db = db_or_url if isinstance(db_or_url, PostgresDb) else PostgresDb(db_or_url)
        self._resolved: EventBus[str | None] = EventBus()
        self._channel = f"{RESOLVED}{secrets.token_hex(8)}"
        db.on_notice(self._channel, lambda elicitation_id: self._resolved.publish("resolved", elicitation_id))
        db.on_restart(lambda: self._resolved.publish("resolved", None))

    async def put(self, elicitation: Elicitation) -> None:
        """Store it with this client among its waiters: the one that stores a question waits on it."""
        pool = await self._db.pool()
        row = (elicitation.id, elicitation.state.value, elicitation.expires_at.timestamp(), _dump(elicitation))
        await pool.execute(PUT, *row, self._channel)

    async def get(self, elicitation_id: str) -> Elicitation | None:
        pool = await self._db.pool()
        data = await pool.fetchval(GET, elicitation_id)
        return None if data is None else Elicitation.from_json(json.loads(data))

    async def watch(self, elicitation_id: str) -> Elicitation | None:
        pool = await self._db.pool()
        data = await pool.fetchval(WATCH, elicitation_id, self._channel)
        if data is None:
            return await self.get(elicitation_id)  # ended (or gone): read after the end, so it shows in what is read
        return Elicitation.from_json(json.loads(data))

    async def transition(
        self, elicitation_id: str, state: State, answer: Answer | None, at: datetime, read: Elicitation | None = None
    ) -> bool:
        pool = await self._db.pool()
        if read is None:
            # A pending row is what was put (only a transition changes it), so one held by the caller needs no read.
            data = await pool.fetchval(GET_PENDING, elicitation_id)
            if data is None:
                return False
            read = Elicitation.from_json(json.loads(data))
        done = resolved(read, state, answer, at)
        changed = await pool.fetch(TRANSITION, elicitation_id, state.value, at.timestamp(), _dump(done))
        return len(changed) == 1

    async def due(self, now: datetime, limit: int = 500) -> list[Elicitation]:
        pool = await self._db.pool()
        rows = await pool.fetch(DUE, now.timestamp(), limit)
        return [Elicitation.from_json(json.loads(row[0])) for row in rows]

    async def purge(self, resolved_before: datetime) -> int:
        pool = await self._db.pool()

        async def delete_batch(limit: int) -> int:
            return rows(await pool.execute(PURGE, resolved_before.timestamp(), limit))

        return await purge_in_batches(delete_batch)

    async def resolutions(self) -> AsyncGenerator[str | None, None]:
        await self._db.pool()
        await self._db.listener.start()
        async with self._resolved.subscribe("resolved") as queue:
            yield None
            while True:
                yield await queue.get()

    async def close(self) -> None:
        await self._db.close()


def _dump(elicitation: Elicitation) -> str:
    return json.dumps(elicitation.to_json(), separators=(",", ":"))
