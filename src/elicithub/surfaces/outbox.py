"""A durable outbox on the store every hub shares: a notification is written with what it tells of, sent by whichever
hub takes it, and tried again with backoff while its channel is down; whoever writes one never waits for it to go.

An item is a record (`outbox:NAME:item:ID`: its body, its attempt, when it may be tried, until when) and an entry of
the list `outbox:NAME` (its id); once it is done with, `outbox:NAME:done:ID` says so. Each attempt N has a key of its
own (`outbox:NAME:try:ID:N`), put before the attempt may be made; only the hub whose take gets that key makes attempt
N. Before it sends, that hub arms attempt N+1 for after a lease (so a hub that dies while sending leaves the item to
another, once the lease is over); after a failure it brings N+1 forward to the backoff; after a success it takes N+1
and deletes the record. Every store's take has one winner, so every attempt is made by one hub, and an item is sent
once unless a hub dies between sending and saying so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import Entry, KeyValueStore
from elicithub.errors import HubError
from elicithub.surfaces.reach import Notified

log = logging.getLogger(__name__)

PAGE = 500
POLL_S = 5.0
"""How often a hub looks for items written by other hubs, or due again, when nothing wakes it sooner."""
FIRST_BACKOFF_S = 1.0
MOST_BACKOFF_S = 300.0
KEPT_S = 3600.0
"""How long an item's keys outlive its `until` (a sweep running late still finds it, and gives it up)."""

Deliver = Callable[[JsonObject], Awaitable[bool]]
"""Send an item's body: True once sent, False when it is no longer worth sending (its question ended); raises
`Undeliverable` when it never will be, anything else when it cannot be sent now (it is tried again)."""


class Undeliverable(HubError):
    """The channel refuses an item for good (a mail server's 5xx): it is given up, not tried again."""

    code = "undeliverable"


@dataclass(frozen=True)
class Item:
    """One notification: `body` for `Deliver`; tried again until `until` (seconds since the epoch)."""

    id: str
    body: JsonObject
    until: float
    attempt: int = 0
    not_before: float = 0.0


class Outbox:
    """The items of one channel (`name`, also the metrics' channel label), sent by `deliver`. `lease_s`: how long an
    attempt may take before another hub may make the next one (longer than `deliver` ever takes)."""

    def __init__(
        self,
        kv: KeyValueStore,
        name: str,
        deliver: Deliver,
        notified: Notified,
        lease_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kv = kv
        self.name = name
        self.deliver = deliver
        self.notified = notified
        self.lease_s = lease_s
        self.clock = clock
        self._wake = asyncio.Event()
        self._next_s = POLL_S

    def _item_key(self, item_id: str) -> str:
        return f"outbox:{self.name}:item:{item_id}"

    def _try_key(self, item_id: str, attempt: int) -> str:
        return f"outbox:{self.name}:try:{item_id}:{attempt}"

    def _done_key(self, item_id: str) -> str:
        return f"outbox:{self.name}:done:{item_id}"

    async def put(self, item_id: str, body: JsonObject, until: float, not_before: float = 0.0) -> None:
        """Write an item to be sent once `not_before` has come, as soon as a hub can (this one is woken at once). An
        id is sent once: an item whose id was sent (or given up) already is not written again."""
        if await self.kv.get(self._done_key(item_id)) is not None:
            return
        item = Item(item_id, body, until, not_before=not_before)
        keep_s = self._keep_s(item)
        await self._save(item, keep_s)
        await self.kv.put(self._try_key(item_id, 0), b"1", keep_s)
        await self.kv.add_entry(f"outbox:{self.name}", item_id, keep_s)
        self._wake.set()

    def _keep_s(self, item: Item) -> float:
        return max(item.until - self.clock(), 0.0) + KEPT_S

    async def _save(self, item: Item, keep_s: float) -> None:
        await self.kv.put(self._item_key(item.id), json.dumps(asdict(item)).encode(), keep_s)

    async def send_due(self) -> int:
        """Make every attempt due that no hub has taken; how many items this hub sent."""
        now = self.clock()
        sent = 0
        self._next_s = POLL_S
        before: Entry | None = None
        while True:
            page = await self.kv.entries(f"outbox:{self.name}", PAGE, before)
            for entry in page:
                raw = await self.kv.get(self._item_key(entry.value))
                if raw is None:
                    continue  # sent, or given up
                item = Item(**json.loads(raw))
                if item.not_before > now:
                    self._next_s = min(self._next_s, item.not_before - now)
                elif await self.kv.take(self._try_key(item.id, item.attempt)) is not None:
                    sent += await self._attempt(item)
            if len(page) < PAGE:
                return sent
            before = page[-1]

    async def _attempt(self, item: Item) -> int:
        """Make the attempt this hub took: 1 if it sent the item."""
        now = self.clock()
        keep_s = self._keep_s(item)
        following = replace(item, attempt=item.attempt + 1, not_before=now + self.lease_s)
        if now >= item.until:
            await self._drop(following, "failed")
            log.warning("%s %s given up after %d attempts", self.name, item.id, item.attempt)
            return 0
        await self._save(following, keep_s)
        await self.kv.put(self._try_key(item.id, following.attempt), b"1", keep_s)
        try:
            delivered = await self.deliver(item.body)
        except Undeliverable as exc:
            await self._drop(following, "failed")
            log.warning("%s %s given up: %s", self.name, item.id, exc)
            return 0
        except Exception as exc:
            n = item.attempt + 1
            backoff_s = min(MOST_BACKOFF_S, FIRST_BACKOFF_S * 2**item.attempt)
            retry = replace(following, not_before=self.clock() + backoff_s)
            await self._save(retry, keep_s)
            self._next_s = min(self._next_s, backoff_s)
            self.notified(self.name, "retried")
            log.warning("%s %s not sent (attempt %d), tried again in %g s: %s", self.name, item.id, n, backoff_s, exc)
            return 0
        await self._drop(following, "sent" if delivered else "skipped")
        return 1 if delivered else 0

    async def _drop(self, following: Item, outcome: str) -> None:
        """Done with the item: nobody makes the attempt armed after this one, and its id is not written again."""
        await self.kv.take(self._try_key(following.id, following.attempt))
        await self.kv.put(self._done_key(following.id), outcome.encode(), self._keep_s(following))
        await self.kv.delete(self._item_key(following.id))
        self.notified(self.name, outcome)

    async def run(self) -> None:
        """Send what is due, again whenever an item is put here, one is due, or every `POLL_S` (others' items)."""
        while True:
            self._wake.clear()  # before reading: an item put while this pass reads makes the next pass at once
            try:
                await self.send_due()
            except Exception:
                log.exception("the %s outbox could not be read", self.name)
            try:
                await asyncio.wait_for(self._wake.wait(), max(self._next_s, 0.01))
            except TimeoutError:
                pass
