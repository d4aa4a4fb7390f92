"""EventBus: per-key fan-out to current subscribers, and no leaked subscriptions."""

from __future__ import annotations

import asyncio

import pytest

from elicithub.core.bus import EventBus


def drain(queue: asyncio.Queue[str]) -> list[str]:
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    return events


@pytest.mark.anyio
async def test_publish_reaches_every_subscriber_of_the_key_only() -> None:
    bus = EventBus[str]()
    async with bus.subscribe("a") as first, bus.subscribe("a") as second, bus.subscribe("b") as other:
        assert bus.publish("a", "one") == 2
        assert bus.publish("a", "two") == 2
        assert drain(first) == ["one", "two"]
        assert drain(second) == ["one", "two"]
        assert drain(other) == []
        assert bus.publish("b", "three") == 1
        assert drain(other) == ["three"]
        assert drain(first) == []


@pytest.mark.anyio
async def test_publish_without_subscribers_is_dropped() -> None:
    bus = EventBus[str]()
    assert bus.publish("nobody", "lost") == 0
    async with bus.subscribe("nobody") as queue:
        assert drain(queue) == []  # no replay of what was published before subscribing


@pytest.mark.anyio
async def test_subscriber_receives_events_published_from_another_task() -> None:
    bus = EventBus[str]()
    async with bus.subscribe("k") as queue:
        asyncio.get_running_loop().call_soon(bus.publish, "k", "hello")
        assert await asyncio.wait_for(queue.get(), 2) == "hello"


@pytest.mark.anyio
async def test_subscriber_count_drops_to_zero_after_the_context_exits() -> None:
    bus = EventBus[str]()
    async with bus.subscribe("k") as outer:
        async with bus.subscribe("k"):
            assert bus.subscribers("k") == 2
        assert bus.subscribers("k") == 1
        assert bus.publish("k", "x") == 1
        assert drain(outer) == ["x"]
    assert bus.subscribers("k") == 0
    assert bus.publish("k", "y") == 0
    assert bus._queues == {}  # no empty per-key sets left behind


@pytest.mark.anyio
async def test_subscription_is_released_when_the_body_raises() -> None:
    bus = EventBus[str]()
    with pytest.raises(RuntimeError):
        async with bus.subscribe("k"):
            raise RuntimeError("boom")
    assert bus.subscribers("k") == 0


@pytest.mark.anyio
async def test_subscription_is_released_when_the_subscribing_task_is_cancelled() -> None:
    bus = EventBus[str]()
    subscribed = asyncio.Event()

    async def listen() -> None:
        async with bus.subscribe("k") as queue:
            subscribed.set()
            await queue.get()

    task = asyncio.create_task(listen())
    await asyncio.wait_for(subscribed.wait(), 2)
    assert bus.subscribers("k") == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bus.subscribers("k") == 0


@pytest.mark.anyio
async def test_many_short_lived_subscriptions_leak_nothing() -> None:
    bus = EventBus[int]()
    for n in range(100):
        async with bus.subscribe(f"stream_{n % 7}") as queue:
            bus.publish(f"stream_{n % 7}", n)
            assert queue.get_nowait() == n
    assert all(bus.subscribers(f"stream_{k}") == 0 for k in range(7))
    assert bus._queues == {}
