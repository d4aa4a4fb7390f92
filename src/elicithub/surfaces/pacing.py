"""Sending what grows at a pace a channel takes: the first of it at once, then at most once per interval while
more comes, never two sends at a time, and the rest when it is complete (Slack's edits of a growing reply, A2A's
artifact chunks)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Pacer:
    """Calls `send` (which sends whatever has come since it last sent) when more came: at once the first time, then
    once `interval_s` has passed since the last send. `stop` ends the pacing; its owner then sends the rest itself,
    knowing no send is under way."""

    def __init__(self, send: Callable[[], Awaitable[None]], interval_s: float) -> None:
        self._send = send
        self._interval_s = interval_s
        self._due = False
        """More came than has been sent."""
        self._task: asyncio.Task[None] | None = None
        """The send waiting for its time, or under way."""
        self._sending = False
        self._sent_at: float | None = None

    def more(self) -> None:
        """More came: it is sent now, or once the interval since the last send has passed."""
        self._due = True
        if self._task is None:
            self._task = asyncio.create_task(self._paced())

    async def _paced(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._due:
                if self._sent_at is not None:
                    wait = self._sent_at + self._interval_s - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                self._due = False
                self._sending = True
                try:
                    await self._send()
                except Exception:
                    # The channel refused this once (Slack unreachable for a moment): the next send, or the
                    # owner's last one, sends what this did not.
                    log.warning("a paced send failed", exc_info=True)
                finally:
                    self._sending = False
                    self._sent_at = loop.time()
        finally:
            if self._task is asyncio.current_task():
                self._task = None

    async def stop(self) -> None:
        """No more paced sends: one waiting for its time is dropped, one under way is waited for (cut short, a
        message posted could be posted again)."""
        task, self._task = self._task, None
        self._due = False
        if task is None:
            return
        if not self._sending:
            task.cancel()
        await asyncio.wait({task})  # its end, however it ended: a failed send was logged already

    def cancel(self) -> None:
        """Give up at once (the surface stops showing the run)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
