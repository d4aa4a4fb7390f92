"""Casts within one process: the backends that serve one process (memory, SQLite) pass messages to the hubs that
share the backend object, as Redis' and Postgres' pass them to every instance."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class LocalCasts:
    """Each message is handed to every listener in a later turn of the loop, in the order sent (as a message from
    another instance would come), never inside `send`."""

    def __init__(self) -> None:
        self._handlers: list[Callable[[str], None]] = []

    def send(self, message: str) -> None:
        if self._handlers:
            asyncio.get_running_loop().call_soon(self._deliver, message)

    def _deliver(self, message: str) -> None:
        for handler in self._handlers:
            try:
                handler(message)
            except Exception:
                log.exception("a cast's listener failed")

    async def listen(self, handler: Callable[[str], None]) -> None:
        self._handlers.append(handler)
