"""The Redis client's batching: every command and transaction issued in one turn of the event loop, by whichever
tasks, goes to Redis in one write, and each gets its own reply."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from typing import Any

import redis.asyncio as redis
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import Connection
from redis.exceptions import ResponseError

Stack = list[tuple[tuple[Any, ...], Mapping[str, Any]]]
"""Commands as redis-py stacks them: each its arguments and its options."""


class _Item:
    """One command (`stack` of one) or one transaction, and where its reply goes."""

    __slots__ = ("reply", "stack", "transaction")

    def __init__(self, stack: Stack, transaction: bool) -> None:
        self.stack = stack
        self.transaction = transaction
        self.reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()


class Batching(redis.Redis):
    """A client whose commands (scripts included) and transactions (`pipeline(transaction=True)`) issued in one turn
    of the loop, by whichever tasks, share one round trip: a run's events written behind go with the read or write
    it makes next, and the writes of many runs go together. Each command still gets its own reply or error, and
    each transaction stays a MULTI/EXEC of its own; what a batch holds is not atomic as a whole, and two batches on
    their way at once may be applied in either order (as two connections' commands would)."""

    _batch: list[_Item] | None = None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        return await self._queued(_Item([(args, options)], transaction=False))

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        if transaction and shard_hint is None:
            return _Transaction(self)
        return super().pipeline(transaction, shard_hint)

    async def _queued(self, item: _Item) -> Any:
        if self._batch is None:
            self._batch = []
            asyncio.get_running_loop().call_soon(self._send)
        self._batch.append(item)
        return await item.reply

    def _send(self) -> None:
        batch, self._batch = self._batch or [], None
        task = asyncio.get_running_loop().create_task(self._sent(batch))
        _sent.add(task)
        task.add_done_callback(_sent.discard)

    async def _sent(self, batch: list[_Item]) -> None:
        try:
            connection = await self.connection_pool.get_connection()  # type: ignore[no-untyped-call]
            try:
                replies = await connection.retry.call_with_retry(
                    lambda: self._exchange(connection, batch), lambda _: connection.disconnect()
                )
            finally:
                await self.connection_pool.release(connection)
        except asyncio.CancelledError:
            for item in batch:
                item.reply.cancel()
            raise
        except Exception as error:
            for item in batch:
                if not item.reply.done():
                    item.reply.set_exception(error)
            return
        for item, value in zip(batch, replies, strict=True):
            if item.reply.done():
                continue  # its caller went away
            if isinstance(value, Exception):
                item.reply.set_exception(value)
            else:
                item.reply.set_result(value)

    async def _exchange(self, connection: Connection, batch: list[_Item]) -> list[Any]:
        """Write the whole batch, then read every reply, so that the connection goes back to the pool in step. Each
        command gets its own reply or error. If the connection fails before the first reply, the batch is written
        again (as redis-py sends a command again: the server may have closed the connection while it was idle in the
        pool); once a reply came, never (Redis has run that much of it): the commands not answered get the error."""
        wire: list[tuple[Any, ...]] = []
        for item in batch:
            commands = [args for args, _ in item.stack]
            wire.extend([("MULTI",), *commands, ("EXEC",)] if item.transaction else commands)
        await connection.send_packed_command(connection.pack_commands(wire))
        replies: list[Any] = []
        for item in batch:
            try:
                if item.transaction:
                    replies.append(await self._transaction_reply(connection, item.stack))
                else:
                    (args, options) = item.stack[0]
                    replies.append(await self.parse_response(connection, args[0], **dict(options)))
            except (redis.ConnectionError, redis.TimeoutError) as error:
                # The connection was lost or went silent (read_response dropped it).
                if not replies:
                    raise
                replies.extend([error] * (len(batch) - len(replies)))
                break
            except Exception as error:  # a Redis error reply, or one its caller's parsing refused
                replies.append(error)
                if not connection.is_connected:
                    # The reply could not be read whole (e.g. not decodable), so redis-py dropped the connection
                    # and the rest of the batch's replies with it: those commands may have run.
                    lost = redis.ConnectionError(f"the reply was lost with the connection: {error!r}")
                    replies.extend([lost] * (len(batch) - len(replies)))
                    break
        return replies

    async def _transaction_reply(self, connection: Connection, stack: Stack) -> list[Any]:
        first: ResponseError | None = None
        for _ in range(len(stack) + 1):  # MULTI's OK, then each command's QUEUED
            try:
                await connection.read_response()
            except ResponseError as error:
                first = first or error
        try:
            results = await connection.read_response()
        except ResponseError as error:  # EXECABORT: a command was refused as it was queued
            raise first or error from None
        data = []
        for value, (args, options) in zip(results, stack, strict=True):
            if isinstance(value, Exception):
                raise value
            callback = self.response_callbacks.get(args[0])
            if callback is not None:
                value = callback(value, **{k: v for k, v in options.items() if k != "keys"})
                if inspect.isawaitable(value):
                    value = await value
            data.append(value)
        return data


class _Transaction(Pipeline):
    """`pipeline(transaction=True)` of a batching client: its MULTI/EXEC goes in the client's next batch. One that
    watches keys or runs scripts goes alone, as redis-py sends it."""

    def __init__(self, client: Batching) -> None:
        super().__init__(client.connection_pool, client.response_callbacks, True, None)
        self._client = client

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        if self.watching or self.scripts or self.explicit_transaction or not raise_on_error:
            return await super().execute(raise_on_error)
        stack, self.command_stack = self.command_stack, []
        if not stack:
            return []
        return list(await self._client._queued(_Item(list(stack), transaction=True)))


_sent: set[asyncio.Task[None]] = set()
"""Batches on their way (the loop keeps only weak references to tasks)."""
