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


async def blocked(other: aredis.Redis, clients: int) -> None:
    """Until `clients` connections are blocked in Redis (a BLPOP waiting): the batch holding it is on the server."""
    while int((await other.info("clients"))["blocked_clients"]) < clients:  # noqa: ASYNC110 - Redis has no event for it
        await asyncio.sleep(0.005)


def whole_number(score: object) -> int:
    value = float(str(score))
    if not value.is_integer():
        raise ValueError(f"{score!r} is not a whole number")
    return int(value)


async def test_a_reply_its_caller_cannot_parse_fails_that_command_alone_and_the_connection_stays_in_step(
    client: aredis.Redis,
) -> None:
    await client.set("text", "x")
    await client.zadd("scores", {"half": 1.5})
    # A reply the caller's parsing refuses (a score that is not a whole number), in a batch with a reply that comes
    # late.
    replies = await asyncio.gather(
        client.zrange("scores", 0, -1, withscores=True, score_cast_func=whole_number),
        client.blpop(["empty"], timeout=0.3),
        return_exceptions=True,
    )
    assert isinstance(replies[0], ValueError)
    assert replies[1] is None
    # The next batch on the same connection reads its own reply, not the one left unread.
    assert await client.get("text") == "x"


async def test_a_reply_that_cannot_be_decoded_fails_its_command_and_the_rest_of_the_batch_as_lost(
    client: aredis.Redis,
    redis_url: str,
) -> None:
    async with aredis.Redis.from_url(redis_url) as raw:
        await raw.set("binary", b"\xff\xfe")
    await client.set("text", "x")
    replies = await asyncio.gather(client.get("binary"), client.incr("counter"), return_exceptions=True)
    assert isinstance(replies[0], UnicodeDecodeError)
    # The connection went with the undecodable reply: the INCR ran, but its reply is lost, which is what it is
    # told, not the other command's error.
    assert isinstance(replies[1], aredis.ConnectionError)
    assert await client.get("counter") == "1"
    assert await client.get("text") == "x"


async def test_a_batch_whose_connection_dies_on_the_way_is_not_sent_again(
    client: aredis.Redis,
    redis_url: str,
) -> None:
    async with aredis.Redis.from_url(redis_url) as other:
        batch = asyncio.gather(client.incr("counter"), client.blpop(["empty"], timeout=2), return_exceptions=True)
        await blocked(other, 1)  # the INCR has run, the BLPOP waits
        await other.client_kill_filter(_type="normal", skipme=True)
        replies = await batch
    assert replies[0] == 1
    assert isinstance(replies[1], aredis.ConnectionError)
    assert await client.get("counter") == "1"  # the INCR ran once
