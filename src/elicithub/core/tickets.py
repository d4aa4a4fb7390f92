"""Single-use tickets in the shared store: issued once, taken once on whichever instance sees them first."""

from __future__ import annotations

import secrets

from elicithub.core.ports import KeyValueStore


class OnceTickets:
    """Tickets under `prefix` in the store; `take` succeeds for exactly one taker (the store's atomic take)."""

    def __init__(self, store: KeyValueStore, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    async def issue(self, ttl_s: float) -> str:
        ticket = secrets.token_urlsafe(18)
        await self.store.put(f"{self.prefix}:{ticket}", b"1", max(ttl_s, 1))
        return ticket

    async def take(self, ticket: str) -> bool:
        """Use the ticket up; False when it was used (or expired) already."""
        return await self.store.take(f"{self.prefix}:{ticket}") is not None
