"""The durable outbox on every store: an item is sent once, by whichever hub takes it; a failed attempt is tried again
after a backoff that grows; an item no longer needed is skipped, one past its time given up; a hub that dies while
sending leaves the item to another after the lease; and the sender wakes when an item is put."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import Backend, KeyValueStore
from elicithub.store import open_backend
from elicithub.surfaces.outbox import FIRST_BACKOFF_S, Outbox
from tests.core_fixtures import DEADLINE_S

pytestmark = pytest.mark.anyio

DAY_S = 24 * 3600.0
LEASE_S = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


class Channel:
    """A channel that records what it was given, fails while `down`, and says an item is no longer needed when its
    body says `stale`."""

    def __init__(self) -> None:
        self.delivered: list[JsonObject] = []
        self.down = False
        self.counted: Counter[tuple[str, str]] = Counter()

    async def deliver(self, body: JsonObject) -> bool:
        if self.down:
            raise ConnectionRefusedError("the server is down")
        if body.get("stale"):
            return False
        self.delivered.append(body)
        return True

    def notified(self, channel: str, outcome: str) -> None:
        self.counted[channel, outcome] += 1


def outbox(kv: KeyValueStore, channel: Channel, clock: Clock) -> Outbox:
    return Outbox(kv, "test", channel.deliver, channel.notified, LEASE_S, clock)


async def test_an_item_is_sent_once_and_its_id_is_not_written_again(backend: Backend) -> None:
    channel, clock = Channel(), Clock()
    box = outbox(backend.kv, channel, clock)
    await box.put("eli_1.asked.bob", {"to": "bob"}, clock.now + DAY_S)
    assert await box.send_due() == 1
    assert await box.send_due() == 0
    await box.put("eli_1.asked.bob", {"to": "bob"}, clock.now + DAY_S)  # told again: already sent
    assert await box.send_due() == 0
    assert channel.delivered == [{"to": "bob"}]
    assert channel.counted == {("test", "sent"): 1}


async def test_an_item_waits_for_its_time(backend: Backend) -> None:
    channel, clock = Channel(), Clock()
    box = outbox(backend.kv, channel, clock)
    await box.put("later", {"to": "bob"}, clock.now + DAY_S, not_before=clock.now + 300)
    assert await box.send_due() == 0
    clock.now += 300
    assert await box.send_due() == 1


async def test_a_failed_attempt_is_tried_again_after_a_backoff_that_grows(backend: Backend) -> None:
    channel, clock = Channel(), Clock()
    box = outbox(backend.kv, channel, clock)
    channel.down = True
    await box.put("item", {"to": "bob"}, clock.now + DAY_S)
    assert await box.send_due() == 0
    assert await box.send_due() == 0  # not yet: the first backoff
    clock.now += FIRST_BACKOFF_S
    assert await box.send_due() == 0
    clock.now += FIRST_BACKOFF_S  # the second backoff is twice the first
    assert await box.send_due() == 0
    assert channel.counted == {("test", "retried"): 2}
    clock.now += FIRST_BACKOFF_S
    assert await box.send_due() == 0
    channel.down = False
    clock.now += 4 * FIRST_BACKOFF_S
    assert await box.send_due() == 1
    assert channel.delivered == [{"to": "bob"}]
    assert channel.counted == {("test", "retried"): 3, ("test", "sent"): 1}


async def test_an_item_no_longer_needed_is_skipped_and_one_past_its_time_given_up(backend: Backend) -> None:
    channel, clock = Channel(), Clock()
    box = outbox(backend.kv, channel, clock)
    await box.put("stale", {"stale": True}, clock.now + DAY_S)
    assert await box.send_due() == 0
    channel.down = True
    await box.put("late", {"to": "bob"}, clock.now + 10)
    assert await box.send_due() == 0
    channel.down = False
    clock.now += 11
    assert await box.send_due() == 0
    assert channel.delivered == []
    assert channel.counted == {("test", "skipped"): 1, ("test", "retried"): 1, ("test", "failed"): 1}


async def test_a_hub_that_dies_while_sending_leaves_the_item_to_another_after_the_lease(backend: Backend) -> None:
    clock = Clock()
    stuck, other = Channel(), Channel()
    entered = asyncio.Event()

    async def hangs(body: JsonObject) -> bool:
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("never")

    dying = Outbox(backend.kv, "test", hangs, stuck.notified, LEASE_S, clock)
    await dying.put("item", {"to": "bob"}, clock.now + DAY_S)
    sending = asyncio.create_task(dying.send_due())
    await asyncio.wait_for(entered.wait(), DEADLINE_S)
    sending.cancel()  # the hub is gone mid-send: nothing after the attempt ran
    box = outbox(backend.kv, other, clock)
    assert await box.send_due() == 0  # the lease is not over
    clock.now += LEASE_S
    assert await box.send_due() == 1
    assert other.delivered == [{"to": "bob"}]


async def test_two_hubs_sending_at_once_send_each_item_once(shared_url: str) -> None:
    one, two = open_backend(shared_url), open_backend(shared_url)
    clock, channel = Clock(), Channel()
    try:
        boxes = [outbox(one.kv, channel, clock), outbox(two.kv, channel, clock)]
        for n in range(20):
            await boxes[n % 2].put(f"item-{n}", {"n": n}, clock.now + DAY_S)
        sent = await asyncio.gather(*(box.send_due() for box in boxes * 3))
        assert sum(sent) == 20
        assert sorted(int(b["n"]) for b in channel.delivered) == list(range(20))
    finally:
        await one.close()
        await two.close()


async def test_the_sender_wakes_when_an_item_is_put(backend: Backend) -> None:
    delivered: asyncio.Queue[Any] = asyncio.Queue()
    channel = Channel()

    async def deliver(body: JsonObject) -> bool:
        await delivered.put(body)
        return True

    box = Outbox(backend.kv, "test", deliver, channel.notified, LEASE_S)
    running = asyncio.create_task(box.run())
    try:
        await box.put("item", {"to": "bob"}, 4_000_000_000.0)
        assert await asyncio.wait_for(delivered.get(), DEADLINE_S) == {"to": "bob"}
    finally:
        running.cancel()
