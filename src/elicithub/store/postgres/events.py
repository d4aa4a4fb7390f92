"""The Postgres backend's event logs: a row per event and a counter per log; each append NOTIFYs the log's key, so
a reader on any hub wakes and reads what was saved."""

from __future__ import annotations

import json

from elicithub.core.jsoncodec import JsonObject
from elicithub.store.notices import Notifier
from elicithub.store.postgres.db import PostgresDb
from elicithub.store.postgres.listener import APPENDED
from elicithub.store.write_behind import Appends, WrittenBehindLog

TRIM_EVERY = 64
"""An append trims its log when its number is a multiple of this, not every time."""

# The counter's row lock orders appends on one key: the next one numbers itself after this one commits, so a
# reader never sees a gap that a slower append fills later.
APPEND = f"""
WITH counter AS (
    INSERT INTO elicithub_event_logs AS logs (key, last) VALUES ($1, 1)
    ON CONFLICT (key) DO UPDATE SET last = logs.last + 1
    RETURNING last
), added AS (
    INSERT INTO elicithub_events (key, seq, data) SELECT $1, last, $2 FROM counter
    RETURNING seq
)
SELECT seq, pg_notify('{APPENDED}', $1) FROM added
"""
TRIM = "DELETE FROM elicithub_events WHERE key = $1 AND seq <= $2"
READ = "SELECT seq, data FROM elicithub_events WHERE key = $1 AND seq > $2 ORDER BY seq LIMIT $3"
LAST = "SELECT last FROM elicithub_event_logs WHERE key = $1"


class PostgresEvents(WrittenBehindLog):
    """Readers here wait on a notifier, woken by this hub's appends and by the NOTIFYs of every hub's."""

    def __init__(self, db: PostgresDb, max_len: int = 1000) -> None:
        super().__init__()
        self._db = db
        self._max_len = max_len
        self._appended = Notifier()
        db.on_notice(APPENDED, self._appended.notify)
        db.on_restart(self._appended.notify_all)

    async def _write(self, _batch: int, appends: Appends) -> list[int]:
        """The appends in order, in one transaction (all or none, so a batch made again never doubles one)."""
        pool = await self._db.pool()
        seqs = []
        async with pool.acquire() as connection, connection.transaction():
            for key, event in appends:
                seq = int(await connection.fetchval(APPEND, key, json.dumps(event, separators=(",", ":"))))
                if seq > self._max_len and seq % TRIM_EVERY == 0:
                    await connection.execute(TRIM, key, seq - self._max_len)
                seqs.append(seq)
        for key, _ in appends:
            self._appended.notify(key)
        return seqs

    async def read(self, key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        pool = await self._db.pool()
        return [(int(seq), json.loads(data)) for seq, data in await pool.fetch(READ, key, after, limit)]

    async def wait(self, key: str, after: int, timeout_s: float, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        await self._db.pool()
        await self._db.listener.start()
        return await self._appended.wait_for(key, lambda: self.read(key, after, limit), timeout_s)

    async def last(self, key: str) -> int:
        await self._behind.stored(key)
        pool = await self._db.pool()
        return int(await pool.fetchval(LAST, key) or 0)
