"""Listening to a store's notices of ended questions: in a task of its own, started over when it fails, and
stopped without waiting on a store client that holds on to the cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable

log = logging.getLogger(__name__)

LISTENER_STOP_S = 3.0

Notices = Callable[[], AsyncGenerator[str | None, None]]
"""Starts listening: `ElicitationStore.resolutions`."""

Heard = Callable[[str | None], Awaitable[None]]
"""Told each notice: the id of a question that ended, or None when listening started over (and what ended meanwhile
was not heard)."""


class Listener:
    def __init__(self, notices: Notices, heard: Heard) -> None:
        self._notices = notices
        self._heard = heard
        self._task: asyncio.Task[None] | None = None

    @property
    def listening(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        notices = self._notices()
        await anext(notices)  # listening from here on
        self._task = asyncio.create_task(self._listen(notices))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # A store client may swallow the cancellation while it reads; never let that hold up a shutdown.
            # Such a listener ends when its store closes.
            done, _ = await asyncio.wait({self._task}, timeout=LISTENER_STOP_S)
            if not done:
                log.warning("the store listener did not stop within %g s; it ends with the store", LISTENER_STOP_S)
            self._task = None

    async def _listen(self, notices: AsyncGenerator[str | None, None]) -> None:
        while True:
            try:
                async with contextlib.aclosing(notices):
                    async for elicitation_id in notices:
                        await self._heard(elicitation_id)
                return
            except Exception:
                log.exception("listening for resolved elicitations failed; listening again in 1 s")
            await asyncio.sleep(1)
            notices = self._notices()
