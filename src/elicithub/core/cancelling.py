"""Cleaning up after a cancelled wait: work that must run to its end even if the caller is cancelled again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


async def settled(stored: asyncio.Future[None]) -> None:
    with contextlib.suppress(Exception):
        await stored


async def despite_cancellation(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` to its end even if the current task is cancelled again meanwhile."""
    task = asyncio.ensure_future(work)
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            continue
    if task.exception() is not None:
        log.error("cleaning up a cancelled elicitation failed", exc_info=task.exception())
