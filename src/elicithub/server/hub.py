"""The Hub: one process's wiring of store, broker, bus, model, downstream servers and conversations."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from elicithub.config import Config
from elicithub.core.broker import Broker
from elicithub.core.bus import EventBus
from elicithub.core.events import StreamEvent
from elicithub.runtime.conversations import Conversations
from elicithub.runtime.loop import Runner
from elicithub.runtime.models import Model, create_model
from elicithub.server.identity import Identity
from elicithub.store import Store, open_store
from elicithub.triggers.mcp import McpBridge

log = logging.getLogger(__name__)

RESOLVED_RETENTION = timedelta(days=1)
"""How long a finished elicitation is kept, so a repeated answer still gets its 200 (and a late one its 409/410)."""


class Hub:
    def __init__(self, config: Config, *, store: Store | None = None, model: Model | None = None) -> None:
        self.config = config
        self.store = store if store is not None else open_store(config.store.url)
        self.bus: EventBus[StreamEvent] = EventBus()
        self.broker = Broker(self.store, self.bus)
        self.model = model if model is not None else create_model(config.model)
        self.tools = McpBridge(
            config.mcp_servers,
            self.broker,
            timeout_s=config.elicitation.timeout_s,
            max_rounds=config.elicitation.max_rounds,
            sampler=self.model,
        )
        self.conversations = Conversations(Runner(self.model, self.tools, self.bus), self.broker)
        self.identity = Identity(config.users)
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.broker.start()
        self._sweeper = asyncio.create_task(self._sweep())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await self.conversations.close()
        await self.broker.close()
        await self.tools.close()
        await self.store.close()

    async def _sweep(self) -> None:
        """Expire questions whose waiter is gone, and forget old finished ones."""
        interval = min(5.0, self.config.elicitation.timeout_s / 2)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.broker.expire_due()
                await self.broker.purge(RESOLVED_RETENTION)
            except Exception:
                log.exception("sweeping elicitations failed")
