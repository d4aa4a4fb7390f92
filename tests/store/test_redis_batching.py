"""The Redis client's batching against a real redis-server: what several tasks issue in one turn of the loop goes in
one write, and each command and transaction still gets its own reply or error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aredis

from elicithub.store.redis.client import connect
from tests.store.conftest import Sent

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aredis.Redis]:
    made = connect(redis_url)
    await made.ping()  # connected before anything is counted
    yield made
    await made.aclose()


async def test_commands_of_several_tasks_in_one_turn_go_in_one_write_each_with_its_reply(
    client: aredis.Redis,
    sent: Sent,
) -> None:
    await client.set("text", "x")
    sent.requests.clear()
    replies = await asyncio.gather(
        client.incr("counter"),
        client.get("text"),
        client.incr("text"),  # fails alone: not a number
        client.hset("hash", "field", "1"),
        return_exceptions=True,
    )
    assert len(sent.requests) == 1
    assert replies[:2] == [1, "x"]
    assert isinstance(replies[2], aredis.ResponseError)
    assert replies[3] == 1


async def test_a_transaction_in_a_batch_stays_a_transaction_with_its_own_results(
    client: aredis.Redis,
    sent: Sent,
) -> None:
    async def transaction() -> list[object]:
        async with client.pipeline(transaction=True) as pipe:
            pipe.set("a", "1")
            pipe.incr("a")
            pipe.get("a")
            return await pipe.execute()

    sent.requests.clear()
    made, read = await asyncio.gather(transaction(), client.get("b"))
    assert len(sent.requests) == 1
    assert made == [True, 2, "2"] and read is None

    async def failing() -> list[object]:
        async with client.pipeline(transaction=True) as pipe:
            pipe.set("c", "1")
            pipe.lpush("a", "x")  # fails when run: "a" holds a string
            return await pipe.execute()

    results = await asyncio.gather(failing(), client.get("a"), return_exceptions=True)
    assert isinstance(results[0], aredis.ResponseError)
    assert results[1] == "2"
    assert await client.get("c") == "1"  # a transaction is not undone by a failing command, as in Redis


async def test_a_script_redis_forgot_is_loaded_again_within_the_batching(client: aredis.Redis) -> None:
    script = client.register_script("return redis.call('INCR', KEYS[1])")
    assert await script(keys=["n"]) == 1
    await client.script_flush()
    assert await asyncio.gather(script(keys=["n"]), script(keys=["n"])) in ([2, 3], [3, 2])


async def test_a_lost_connection_is_made_again_for_the_next_batch(client: aredis.Redis, redis_url: str) -> None:
    await client.set("k", "1")
    async with aredis.Redis.from_url(redis_url) as other:
        await other.client_kill_filter(_type="normal", skipme=True)
    assert await client.get("k") == "1"
