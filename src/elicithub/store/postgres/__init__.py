"""The shared, durable backend on Postgres: every record kind in `elicithub_*` tables of one database, shared by
every hub that points at it, with LISTEN/NOTIFY for cross-instance wake-ups."""

from __future__ import annotations

from elicithub.store.postgres.casts import PostgresCasts
from elicithub.store.postgres.conversations import PostgresConversations
from elicithub.store.postgres.db import PostgresDb
from elicithub.store.postgres.elicitations import PostgresElicitations
from elicithub.store.postgres.events import PostgresEvents
from elicithub.store.postgres.kv import PostgresKv
from elicithub.store.postgres.runs import PostgresRuns
from elicithub.store.postgres.schema import LATEST, migrate, version


class PostgresBackend:
    """Connects on first use (or `open`), bringing the schema up to date then; one pool and one listening
    connection per backend."""

    shared = True
    durable = True

    def __init__(
        self, url: str, events_max_len: int = 1000, pool_size: int = 10, statement_timeout_s: float = 30
    ) -> None:
        self.url = url
        self._db = PostgresDb(url, pool_size, statement_timeout_s)
        self.elicitations = PostgresElicitations(self._db)
        self.runs = PostgresRuns(self._db)
        self.conversations = PostgresConversations(self._db)
        self.kv = PostgresKv(self._db)
        self.events = PostgresEvents(self._db, events_max_len)
        self.casts = PostgresCasts(self._db)

    async def open(self) -> None:
        await self._db.pool()

    async def ready(self) -> str | None:
        try:
            reached = await version(await self._db.pool())
        except Exception as exc:
            return f"the Postgres store does not answer: {type(exc).__name__}"
        if reached != LATEST:
            return f"the Postgres store's schema is at version {reached}, this hub knows {LATEST}: run `store migrate`"
        return None

    async def migrate(self) -> tuple[list[int], int]:
        """Apply the schema's pending steps now: the numbers of those applied, and the version reached."""
        connection = await self._db.connect()
        try:
            return await migrate(connection), await version(connection)
        finally:
            await connection.close()

    async def close(self) -> None:
        await self.casts.close()
        await self.events.close()
        await self._db.close()
