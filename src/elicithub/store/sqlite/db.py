"""One SQLite file used from the event loop: statement batches in one transaction per turn, checkpointed apart."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from elicithub.errors import HubError

T = TypeVar("T")

_Op = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]"]
_Done = tuple["asyncio.Future[Any]", Any, BaseException | None]
"""An op's future, with its result or its error."""


class _Failed(HubError):
    """A statement batch failed and was rolled back (its cause says why)."""


class SqliteDb:
    """One SQLite file in WAL mode, written from the event loop in batches: every statement batch asked for in one
    turn of the loop runs in one transaction (if one of them fails, each runs again alone), so a busy hub commits
    once for many writes and pays no thread hop per statement. Nothing here waits for the disk: commits are
    `synchronous=NORMAL` (WAL: a crash of the process loses nothing; a power cut may lose the last commits), and
    the WAL is copied back into the database file (the step that syncs) by a thread of its own, off the loop."""

    def __init__(self, path: Path, schema: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer thread does it
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(schema)
        self._queue: list[_Op] = []
        self._closed = False
        self._checkpointer = _Checkpointer(path)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` inside this turn's transaction; its own failure undoes only its own statements."""
        if self._closed:
            raise sqlite3.ProgrammingError("the SQLite store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._queue:
            loop.call_soon(self._flush)
        self._queue.append((fn, future))
        return await future

    def _flush(self) -> None:
        batch, self._queue = self._queue, []
        try:
            results = self._transaction(batch)
        except _Failed:
            # One of them failed: undo them all and give each its own transaction, so only it fails.
            results = [result for op in batch for result in self._alone(op)]
        for future, result, error in results:
            if future.done():  # its caller went away
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)
        self._checkpointer.wrote(len(batch))

    def _transaction(self, batch: list[_Op]) -> list[_Done]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            results: list[_Done] = [(future, fn(db), None) for fn, future in batch]
            db.execute("COMMIT")
        except Exception as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise _Failed from exc
        return results

    def _alone(self, op: _Op) -> list[_Done]:
        try:
            return self._transaction([op])
        except _Failed as failed:
            assert failed.__cause__ is not None
            return [(op[1], None, failed.__cause__)]

    async def close(self) -> None:
        if self._closed:
            return
        if self._queue:
            self._flush()
        self._closed = True
        await asyncio.to_thread(self._checkpointer.stop)
        self._db.close()


class _Checkpointer:
    """Copies the WAL back into the database file now and then, on its own connection and thread."""

    EVERY_S = 1.0

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wake = threading.Event()
        self._stopping = False
        self._pending = 0
        self._thread = threading.Thread(target=self._loop, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def wrote(self, statements: int) -> None:
        self._pending += statements
        if self._pending >= 1000:
            self._wake.set()

    def _loop(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None)
        db.execute("PRAGMA busy_timeout=5000")
        try:
            while not self._stopping:
                self._wake.wait(self.EVERY_S)
                self._wake.clear()
                if self._pending:
                    self._pending = 0
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()
