"""One Postgres database used by a hub: a pool made on first use (applying the schema's pending steps), and the
listener that brings other hubs' notices."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import asyncpg

from elicithub.errors import StoreUnusable
from elicithub.store.postgres.listener import Listener
from elicithub.store.postgres.schema import migrate

log = logging.getLogger(__name__)

CLOSE_S = 2.0
LISTENER_NAME = "elicithub listener"


class PostgresDb:
    """`pool_size` connections at most; every statement is cut off after `statement_timeout_s` by the server."""

    def __init__(self, dsn: str, pool_size: int = 10, statement_timeout_s: float = 30) -> None:
        self._dsn = dsn
        self._pool_size = pool_size
        self._settings = {
            "application_name": "elicithub",
            "statement_timeout": str(max(1, int(statement_timeout_s * 1000))),
        }
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()
        self._notice_handlers: dict[str, Callable[[str], object]] = {}
        self._restart_handlers: list[Callable[[], object]] = []
        self.listener = Listener(
            lambda: self.connect(LISTENER_NAME), lambda: tuple(self._notice_handlers), self._notice, self._restart
        )

    async def connect(self, name: str = "elicithub") -> asyncpg.Connection:
        """A connection of its own, apart from the pool (the listener holds one for as long as it runs); `name`
        is how `pg_stat_activity` shows it."""
        try:
            return await asyncpg.connect(self._dsn, server_settings={**self._settings, "application_name": name})
        except (OSError, asyncpg.PostgresError) as exc:
            raise StoreUnusable(f"cannot connect to the Postgres store: {exc}") from exc

    async def pool(self) -> asyncpg.Pool:
        """The pool, made on first use: the schema is brought up to date (or refused) before any statement runs."""
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                connection = await self.connect()
                try:
                    applied = await migrate(connection)
                finally:
                    await connection.close()
                if applied:
                    log.info("Postgres store: applied schema steps %s", ", ".join(map(str, applied)))
                self._pool = await asyncpg.create_pool(
                    self._dsn, min_size=1, max_size=self._pool_size, server_settings=self._settings
                )
        return self._pool

    def on_notice(self, channel: str, handler: Callable[[str], object]) -> None:
        """Hand `channel`'s notices to `handler`; the listener listens on every channel named before it starts."""
        self._notice_handlers[channel] = handler

    def on_restart(self, handler: Callable[[], object]) -> None:
        self._restart_handlers.append(handler)

    def _notice(self, channel: str, payload: str) -> None:
        handler = self._notice_handlers.get(channel)
        if handler is not None:
            handler(payload)

    def _restart(self) -> None:
        for handler in self._restart_handlers:
            handler()

    async def close(self) -> None:
        await self.listener.close()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), CLOSE_S)
            except TimeoutError:
                log.warning("closing the Postgres pool took too long; dropped its connections")
                pool.terminate()


def rows(status: str) -> int:
    """The row count of a command's status ('DELETE 12')."""
    return int(status.rsplit(" ", 1)[-1])
