"""The Postgres backend's casts: NOTIFYs on one channel, `elicithub_casts`, heard through the backend's listener."""

from __future__ import annotations

from collections.abc import Callable

from elicithub.store.casts import CastSender, deliver
from elicithub.store.postgres.db import PostgresDb

CHANNEL = "elicithub_casts"

# A batch in one statement, its notices in the array's order. Postgres delivers identical notices of one
# transaction once, so each payload starts with its place in the batch and a space, which the listener drops.
SEND = f"SELECT count(pg_notify('{CHANNEL}', i || ' ' || m)) FROM unnest($1::text[]) WITH ORDINALITY AS t(m, i)"


class PostgresCasts:
    """Casts queued while the previous batch was on its way go out in one statement, on a pooled connection."""

    def __init__(self, db: PostgresDb) -> None:
        self._db = db
        self._handler: Callable[[str], None] | None = None
        self._sender = CastSender(self._notify)
        # Named now, before anything starts the listener: it listens on the channels named before it starts.
        db.on_notice(CHANNEL, self._heard)

    def send(self, message: str) -> None:
        self._sender.send(message)

    async def _notify(self, messages: list[str]) -> None:
        pool = await self._db.pool()
        await pool.execute(SEND, messages)

    def _heard(self, payload: str) -> None:
        if self._handler is not None:
            deliver(self._handler, payload.partition(" ")[2])

    async def listen(self, handler: Callable[[str], None]) -> None:
        """Returns once the backend's listener listens; raises when it cannot connect."""
        self._handler = handler
        await self._db.listener.start()

    async def close(self) -> None:
        await self._sender.close()
