"""The embedded default backend: every record kind in one SQLite file, writes as compare-and-set updates."""

from __future__ import annotations

from pathlib import Path

from elicithub.store.casts import LocalCasts
from elicithub.store.sqlite.conversations import SqliteConversations
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.sqlite.elicitations import SqliteElicitations
from elicithub.store.sqlite.events import SqliteEvents
from elicithub.store.sqlite.kv import SqliteKv
from elicithub.store.sqlite.runs import SqliteRuns
from elicithub.store.sqlite.schema import SCHEMA


class SqliteBackend:
    shared = False
    durable = True

    def __init__(self, path: Path, events_max_len: int = 1000) -> None:
        self.url = f"sqlite:///{path}"
        self._db = SqliteDb(path, SCHEMA)
        self.elicitations = SqliteElicitations(self._db)
        self.runs = SqliteRuns(self._db)
        self.events = SqliteEvents(self._db, events_max_len)
        self.conversations = SqliteConversations(self._db, self.events)
        self.kv = SqliteKv(self._db)
        self.casts = LocalCasts()

    async def open(self) -> None:
        return None

    async def ready(self) -> str | None:
        try:
            await self._db.run(lambda db: db.execute("SELECT count(*) FROM sqlite_master").fetchone())
        except Exception as exc:
            return f"the SQLite store does not answer: {exc}"
        return None

    async def close(self) -> None:
        await self.events.close()
        await self._db.close()
