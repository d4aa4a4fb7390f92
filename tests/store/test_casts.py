"""Casts between hubs sharing a Redis or Postgres store: every instance hears every cast (its own too) in order,
listening goes on after a lost connection, and sending never waits nor fails, whatever the store does."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from elicithub.core.ports import CAST_MAX_BYTES, Backend
from elicithub.store import open_backend
from elicithub.store.casts import MAX_WAITING, CastFanOut
from tests.conftest import free_port
from tests.core_fixtures import DEADLINE_S, PostgresServer, RedisServer, until

pytestmark = pytest.mark.anyio


class Heard:
    """A listener that keeps the casts it is handed, and lets a test wait until they say what it expects."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, message: str) -> None:
        self.messages.append(message)
        self._changed.set()

    async def until(self, condition: Callable[[list[str]], bool]) -> None:
        with anyio.fail_after(DEADLINE_S):
            while not condition(self.messages):
                self._changed.clear()
                await self._changed.wait()

    async def count(self, n: int) -> list[str]:
        await self.until(lambda messages: len(messages) >= n)
        return self.messages


async def _probe_until_heard(send: Callable[[str], None], *heard: Heard) -> None:
    """Send probes until each listener heard one: casts sent before it listened again are lost."""
    with anyio.fail_after(DEADLINE_S):
        for attempt in itertools.count():
            send(f"probe {attempt}")
            with anyio.move_on_after(0.2):  # only how often a probe goes: the test waits as long as it takes
                for listener in heard:
                    await listener.until(lambda m: any(x.startswith("probe") for x in m))
                return


@dataclass
class Hubs:
    """Two backends on one store, as two hubs have, each listening; `cut()` ends their listening connections."""

    a: Backend
    b: Backend
    heard_a: Heard
    heard_b: Heard
    cut: Callable[[], None]


@pytest.fixture(params=["redis", "postgres"])
async def hubs(request: pytest.FixtureRequest) -> AsyncIterator[Hubs]:
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        server: RedisServer = request.getfixturevalue("redis_server")

        def cut() -> None:
            with server.client() as admin:
                assert admin.client_kill_filter(_type="pubsub") == 2

    else:
        url = request.getfixturevalue("postgres_url")
        postgres: PostgresServer = request.getfixturevalue("postgres_server")

        def cut() -> None:
            assert postgres.kill_listeners() == 2

    a, b = open_backend(url), open_backend(url)
    try:
        heard_a, heard_b = Heard(), Heard()
        await a.casts.listen(heard_a)
        await b.casts.listen(heard_b)
        yield Hubs(a, b, heard_a, heard_b, cut)
    finally:
        await a.close()
        await b.close()


async def test_every_instance_hears_every_cast_its_own_too_in_the_order_sent(hubs: Hubs) -> None:
    sent = [f"token {i}" for i in range(300)]
    for i, message in enumerate(sent):
        hubs.a.casts.send(message)
        if i % 7 == 0:
            await asyncio.sleep(0)  # some alone, some queued together
    assert await hubs.heard_b.count(300) == sent
    assert await hubs.heard_a.count(300) == sent


async def test_casts_from_two_instances_each_keep_their_order(hubs: Hubs) -> None:
    for i in range(100):
        hubs.a.casts.send(f"a{i}")
        hubs.b.casts.send(f"b{i}")
    for heard in (hubs.heard_a, hubs.heard_b):
        messages = await heard.count(200)
        assert [m for m in messages if m.startswith("a")] == [f"a{i}" for i in range(100)]
        assert [m for m in messages if m.startswith("b")] == [f"b{i}" for i in range(100)]


async def test_identical_casts_sent_together_each_arrive(hubs: Hubs) -> None:
    # Postgres would fold identical notices of one transaction into one.
    for _ in range(3):
        hubs.a.casts.send("stop")
    hubs.a.casts.send("")
    assert await hubs.heard_b.count(4) == ["stop", "stop", "stop", ""]


async def test_a_cast_of_the_largest_size_arrives_whole(hubs: Hubs) -> None:
    largest = "a" + "€" + "😀" * 1749  # 1 + 3 + 4 * 1749 bytes of UTF-8
    assert len(largest.encode()) == CAST_MAX_BYTES
    other = "é" * (CAST_MAX_BYTES // 2)
    hubs.a.casts.send(largest)
    hubs.a.casts.send(other)
    hubs.a.casts.send("after")
    assert await hubs.heard_b.count(3) == [largest, other, "after"]


async def test_a_cast_too_large_is_dropped_alone_and_logged(hubs: Hubs, caplog: pytest.LogCaptureFixture) -> None:
    hubs.a.casts.send("before")
    hubs.a.casts.send("€" * (CAST_MAX_BYTES // 3 + 1))
    hubs.a.casts.send("after")
    assert await hubs.heard_b.count(2) == ["before", "after"]
    assert "a cast of 7002 bytes was dropped" in caplog.text


async def test_a_listener_that_fails_still_hears_the_next_casts(hubs: Hubs, caplog: pytest.LogCaptureFixture) -> None:
    heard: list[str] = []
    done = asyncio.Event()

    def failing(message: str) -> None:
        heard.append(message)
        if message == "last":
            done.set()
        raise RuntimeError("the listener broke")

    third = open_backend(hubs.a.url)
    try:
        await third.casts.listen(failing)
        for message in ("one", "two", "last"):
            hubs.a.casts.send(message)
        with anyio.fail_after(DEADLINE_S):
            await done.wait()
        assert heard == ["one", "two", "last"]
        assert "a cast's listener failed" in caplog.text
    finally:
        await third.close()


async def test_listening_goes_on_after_the_connection_is_lost(hubs: Hubs) -> None:
    hubs.a.casts.send("before")
    await hubs.heard_b.count(1)
    hubs.cut()
    # Casts sent while nobody listens are lost: send until one is heard again on both hubs.
    await _probe_until_heard(hubs.a.casts.send, hubs.heard_a, hubs.heard_b)
    after = [f"after {i}" for i in range(50)]
    for message in after:
        hubs.b.casts.send(message)
    for heard in (hubs.heard_a, hubs.heard_b):
        await heard.until(lambda m: "after 49" in m)
        assert [m for m in heard.messages if m.startswith("after")] == after


async def test_a_hub_listens_again_once_a_redis_that_was_down_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Past redis-py's own reconnection attempts: the hub subscribes anew, for as long as it takes.
    server = RedisServer(tmp_path)
    backend = open_backend(server.url())
    try:
        heard = Heard()
        await backend.casts.listen(heard)
        server.stop()
        with caplog.at_level(logging.WARNING):
            backend.casts.send("while down")
            await until(lambda: "listening for casts failed" in caplog.text)
            await until(lambda: "casts are being dropped" in caplog.text)
            server = RedisServer(tmp_path, port=server.port)
            await _probe_until_heard(backend.casts.send, heard)
            backend.casts.send("back")
            await heard.until(lambda m: "back" in m)
            assert "while down" not in heard.messages
            await until(lambda: "casts are sent again" in caplog.text)
    finally:
        await backend.close()
        server.stop()


@pytest.mark.parametrize("scheme", ["redis", "postgres"])
async def test_sending_to_a_store_that_is_down_neither_raises_nor_waits(
    scheme: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there
    url = f"redis://127.0.0.1:{port}/0" if scheme == "redis" else f"postgresql://postgres@127.0.0.1:{port}/x"
    before = asyncio.all_tasks()
    backend = open_backend(url)
    try:
        with caplog.at_level(logging.WARNING, "elicithub.store.casts"):
            for i in range(MAX_WAITING + 100):
                backend.casts.send(f"token {i}")  # returns at once, never raises
            await until(lambda: "casts are being dropped" in caplog.text)
    finally:
        with anyio.fail_after(DEADLINE_S):
            await backend.close()
    assert asyncio.all_tasks() - before == set()


async def test_close_sends_what_waits_then_stops_listening_and_sending(shared_url: str) -> None:
    before = asyncio.all_tasks()
    a, b = open_backend(shared_url), open_backend(shared_url)
    heard_a, heard_b = Heard(), Heard()
    await a.casts.listen(heard_a)
    await b.casts.listen(heard_b)
    b.casts.send("last words")
    await b.close()
    assert await heard_a.count(1) == ["last words"]
    b.casts.send("after close")  # dropped
    a.casts.send("from a")
    assert await heard_a.count(2) == ["last words", "from a"]
    await a.close()
    assert "from a" not in heard_b.messages  # it had stopped listening
    assert asyncio.all_tasks() - before == set()


@pytest.mark.parametrize("store", ["redis", "postgres"])
async def test_the_parts_of_a_hub_that_listen_each_hear_every_cast_in_order(
    store: str, request: pytest.FixtureRequest
) -> None:
    # A backend is listened to once (Postgres keeps one listener); the fan-out hands each cast to every part.
    url = request.getfixturevalue("redis_url" if store == "redis" else "postgres_url")
    hub, other = open_backend(url), open_backend(url)
    try:
        casts = CastFanOut(hub.casts)
        turns, tools = Heard(), Heard()
        await casts.listen(turns)
        await casts.listen(tools)
        sent = [f"cast {i}" for i in range(50)]
        for message in sent:
            other.casts.send(message)
        casts.send("own")
        for part in (turns, tools):
            heard = await part.count(51)
            assert [m for m in heard if m != "own"] == sent and heard.count("own") == 1
    finally:
        await hub.close()
        await other.close()
