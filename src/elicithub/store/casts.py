"""Casts (`core.ports.Casts`): within one process, for the backends that serve one (memory, SQLite); the sending the
shared backends (Redis, Postgres) have in common, written behind in batches; and one store's casts shared by the parts
of a hub that each listen."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from elicithub.core.ports import CAST_MAX_BYTES, Casts

log = logging.getLogger(__name__)

MAX_WAITING = 2000
"""Casts waiting to be sent past which more are dropped: a store that does not take them must not fill memory."""
SEND_TIMEOUT_S = 5.0
"""A batch not sent by then is dropped: a store that went silent must not hold every later cast back."""
PAUSE_S = 1.0
"""After a batch failed, how long what is sent meanwhile waits before the next try: a store that is down is not
asked again for every cast."""
CLOSE_S = 2.0


def deliver(handler: Callable[[str], None], message: str) -> None:
    """Hand a cast to a listener; one that fails is logged, and the next casts still reach it."""
    try:
        handler(message)
    except Exception:
        log.exception("a cast's listener failed")


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
            deliver(handler, message)

    async def listen(self, handler: Callable[[str], None]) -> None:
        self._handlers.append(handler)


class CastFanOut:
    """One store's casts heard by several parts of a hub (model turns as they stream, people's tool listings): the
    store is listened to once, as it asks, and each message handed to every part, which passes over those that are
    not its own."""

    def __init__(self, casts: Casts) -> None:
        self._casts = casts
        self._handlers: list[Callable[[str], None]] = []

    def send(self, message: str) -> None:
        self._casts.send(message)

    async def listen(self, handler: Callable[[str], None]) -> None:
        self._handlers.append(handler)
        if len(self._handlers) == 1:
            await self._casts.listen(self._deliver)

    def _deliver(self, message: str) -> None:
        for handler in self._handlers:
            deliver(handler, message)


class CastSender:
    """`send` returns at once; one task sends, in order: everything sent while the previous batch was on its way
    goes to `send_batch` together, in one round trip. A batch that fails (or takes over `SEND_TIMEOUT_S`) is
    dropped; so is a cast over `CAST_MAX_BYTES` (alone, before it could fail the batch), and one sent while
    `MAX_WAITING` wait. Drops are logged as they begin, and counted when casts go through again."""

    def __init__(self, send_batch: Callable[[list[str]], Awaitable[None]]) -> None:
        self._send_batch = send_batch
        self._waiting: list[str] = []
        self._sending: asyncio.Task[None] | None = None
        self._dropped = 0
        self._closed = False

    def send(self, message: str) -> None:
        if self._closed:
            log.debug("a cast sent after the store closed was dropped")
            return
        # Encoding only a message that might be too long: most are a few characters.
        if len(message) * 4 > CAST_MAX_BYTES and len(message.encode()) > CAST_MAX_BYTES:
            log.error("a cast of %d bytes was dropped: at most %d", len(message.encode()), CAST_MAX_BYTES)
            return
        if len(self._waiting) >= MAX_WAITING:
            self._drop(1, f"{MAX_WAITING} are waiting to be sent")
            return
        self._waiting.append(message)
        if self._sending is None:
            self._sending = asyncio.get_running_loop().create_task(self._drain(), name="cast-sender")

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    async with asyncio.timeout(SEND_TIMEOUT_S):
                        await self._send_batch(batch)
                except Exception as exc:
                    self._drop(len(batch), f"sending them failed ({type(exc).__name__}: {exc})")
                    await asyncio.sleep(PAUSE_S)
                    continue
                if self._dropped:
                    log.warning("casts are sent again; %d were dropped", self._dropped)
                    self._dropped = 0
        finally:
            self._sending = None

    def _drop(self, count: int, why: str) -> None:
        if not self._dropped:
            log.warning("casts are being dropped: %s", why)
        self._dropped += count

    async def close(self) -> None:
        """Send what waits (for `CLOSE_S` at most), then stop."""
        self._closed = True
        sending = self._sending
        if sending is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(sending), CLOSE_S)
        except TimeoutError:
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
            log.warning("casts still waiting were dropped: the store closed before they could be sent")
