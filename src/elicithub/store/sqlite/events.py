"""The SQLite backend's event log: every event in the file, and each conversation's newest ones in memory too.

One process writes a SQLite file, so what it appended is all there is: a reader following a run here is served
from memory, and only a reader from further back (after a restart, or past the memory's reach) reads the file.
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from elicithub.core.jsoncodec import JsonObject, as_object
from elicithub.store.notices import Notifier
from elicithub.store.sqlite.db import SqliteDb
from elicithub.store.write_behind import Appends, WrittenBehindLog

KEPT_PER_CONVERSATION = 256
KEPT_CONVERSATIONS = 10_000


@dataclass
class _Tail:
    """A conversation's newest events: every one after `base`, up to `last`, is in `events` (once committed)."""

    last: int
    base: int
    events: deque[tuple[int, JsonObject]] = field(default_factory=deque)


class SqliteEvents(WrittenBehindLog):
    """Each conversation's newest events in one table; readers here wait on a notifier and read from memory."""

    def __init__(self, db: SqliteDb, max_len: int = 1000) -> None:
        super().__init__()
        self._run = db.run
        self._max_len = max_len
        self._appended = Notifier()
        self._tails: OrderedDict[str, _Tail] = OrderedDict()

    async def _write(self, _batch: int, appends: Appends) -> list[int]:
        """Number the appends after each log's last, store them in one batch, then keep them in memory. A batch
        that fails leaves the numbers as they were, for the batch made again."""
        tails = [await self._tail(key) for key, _ in appends]
        before = {id(tail): (tail, tail.last) for tail in tails}
        rows: list[tuple[str, int, str]] = []
        for (key, event), tail in zip(appends, tails, strict=True):
            tail.last += 1
            rows.append((key, tail.last, json.dumps(event, separators=(",", ":"))))

        def write(db: sqlite3.Connection) -> None:
            db.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
            for key, seq, _ in rows:
                if seq > self._max_len and seq % 64 == 0:  # trim now and then, not on every append
                    db.execute("DELETE FROM events WHERE key = ? AND seq <= ?", (key, seq - self._max_len))

        try:
            await self._run(write)
        except BaseException:
            for tail, last in before.values():
                tail.last = last
            raise
        for (key, event), tail, (_, seq, _) in zip(appends, tails, rows, strict=True):
            if len(tail.events) >= KEPT_PER_CONVERSATION:
                tail.base = tail.events.popleft()[0]
            tail.events.append((seq, as_object(event)))
            self._appended.notify(key)
        return [seq for _, seq, _ in rows]

    async def read(self, key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        tail = self._tails.get(key)
        if tail is not None and after >= tail.base:
            return [item for item in tail.events if item[0] > after][:limit]

        def read(db: sqlite3.Connection) -> list[Any]:
            return db.execute(
                "SELECT seq, data FROM events WHERE key = ? AND seq > ? ORDER BY seq LIMIT ?", (key, after, limit)
            ).fetchall()

        return [(int(seq), json.loads(data)) for seq, data in await self._run(read)]

    async def wait(self, key: str, after: int, timeout_s: float, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        return await self._appended.wait_for(key, lambda: self.read(key, after, limit), timeout_s)

    async def last(self, key: str) -> int:
        await self._behind.stored(key)
        tail = self._tails.get(key)
        return tail.last if tail is not None else await self._last_written(key)

    def forget(self, key: str) -> None:
        """The conversation's events were deleted (purged)."""
        self._tails.pop(key, None)

    async def _tail(self, key: str) -> _Tail:
        tail = self._tails.get(key)
        if tail is None:
            last = await self._last_written(key)
            tail = self._tails.get(key)  # another append may have made it meanwhile
            if tail is None:
                tail = self._tails[key] = _Tail(last, last)
                if len(self._tails) > KEPT_CONVERSATIONS:
                    self._tails.popitem(last=False)
        self._tails.move_to_end(key)
        return tail

    async def _last_written(self, key: str) -> int:
        def read(db: sqlite3.Connection) -> int:
            return int(db.execute("SELECT MAX(seq) FROM events WHERE key = ?", (key,)).fetchone()[0] or 0)

        return await self._run(read)
