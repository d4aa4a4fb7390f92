"""The Postgres backend's wake-ups: one connection LISTENing on the hub's channels, connected again when lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection

import asyncpg

log = logging.getLogger(__name__)

APPENDED = "elicithub_appended"
"""NOTIFY channel: the key of an event log that got an event."""

PING_S = 5.0
"""How often an idle listening connection is checked: a dead peer without a closed socket shows only then."""
RETRY_S = (0.05, 0.2, 1.0, 2.0)
"""Waits between attempts to listen again, the last one repeated."""
CLOSE_S = 2.0


class Listener:
    """Listens on `channels()` (read each time it connects), hands each notice to `on_notice(channel, payload)`;
    after listening again calls `on_restart()`, since notices sent while the connection was down are lost: whoever
    waits must re-read."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection]],
        channels: Callable[[], Collection[str]],
        on_notice: Callable[[str, str], None],
        on_restart: Callable[[], None],
    ) -> None:
        self._connect = connect
        self._channels = channels
        self._on_notice = on_notice
        self._on_restart = on_restart
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._failed: BaseException | None = None

    async def start(self) -> None:
        """Listen from now on (returns once listening); the first connection's failure is raised here."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="postgres-listener")
        if not self._listening.is_set():
            waiting = asyncio.ensure_future(self._listening.wait())
            await asyncio.wait({waiting, self._task}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if self._failed is not None:
                failed, self._failed, self._task = self._failed, None, None
                raise failed

    async def _run(self) -> None:
        attempt = 0
        while True:
            connection: asyncpg.Connection | None = None
            try:
                connection = await self._connect()
                await self._listen(connection)
                attempt = 0
                log.warning("the Postgres listening connection was lost; connecting again")
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                if not self._listening.is_set():
                    self._failed = exc  # the first attempt: the caller of start() learns why
                    return
                log.warning("cannot listen to Postgres notices (%s); trying again", exc)
            finally:
                if connection is not None:
                    await _close(connection)
            await asyncio.sleep(RETRY_S[min(attempt, len(RETRY_S) - 1)])
            attempt += 1

    async def _listen(self, connection: asyncpg.Connection) -> None:
        """Listen on `connection` until it is lost."""
        lost = asyncio.Event()
        connection.add_termination_listener(lambda _: lost.set())
        for channel in self._channels():
            await connection.add_listener(channel, self._notice)
        if self._listening.is_set():
            log.info("listening to Postgres notices again")
            self._on_restart()
        self._listening.set()
        while not connection.is_closed():
            try:
                await asyncio.wait_for(lost.wait(), PING_S)
                return
            except TimeoutError:
                await connection.fetchval("SELECT 1", timeout=PING_S)

    def _notice(self, _connection: object, _pid: int, channel: str, payload: object) -> None:
        self._on_notice(channel, str(payload))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


async def _close(connection: asyncpg.Connection) -> None:
    try:
        await asyncio.wait_for(connection.close(), CLOSE_S)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
        connection.terminate()
