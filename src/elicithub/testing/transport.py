"""Transports under the SDK client at the JSON-RPC message level: one that records what passes, one that replays."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client._transport import Transport, TransportStreams
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCMessage
from mcp_types.jsonrpc import jsonrpc_message_adapter

from elicithub.testing.cassette import Normalizer, RawMessage, Side, diff


def _raw(message: JSONRPCMessage) -> RawMessage:
    data: RawMessage = jsonrpc_message_adapter.dump_python(message, by_alias=True, mode="json", exclude_none=True)
    return data


class _Pipes:
    """The client's end of a transport we stand in for: what it sends arrives on `from_client`, and what is sent on
    `to_client` reaches it (`buffer` messages may wait there)."""

    def __init__(self, buffer: int) -> None:
        self.to_server, self.from_client = anyio.create_memory_object_stream[SessionMessage](0)
        self.to_client, self.from_server = anyio.create_memory_object_stream[SessionMessage | Exception](buffer)


class _Streams(ABC):
    """An async context manager over a generator of streams (a Transport, as the SDK's Client takes it)."""

    def __init__(self) -> None:
        self._cm: AbstractAsyncContextManager[TransportStreams] | None = None

    @abstractmethod
    def _connect(self) -> AbstractAsyncContextManager[TransportStreams]:
        """The streams of one connection, open for as long as the context is."""

    async def __aenter__(self) -> TransportStreams:
        self._cm = self._connect()
        return await self._cm.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._cm is not None:
            await self._cm.__aexit__(exc_type, exc, tb)
            self._cm = None


class Recording(_Streams):
    """Passes every message through to `inner` unchanged, keeping its stable form in `messages` in wire order."""

    def __init__(self, inner: Transport) -> None:
        super().__init__()
        self.inner = inner
        self.normalizer = Normalizer()
        self.messages: list[tuple[Side, RawMessage]] = []

    def _keep(self, side: Side, message: JSONRPCMessage) -> None:
        self.messages.append((side, self.normalizer.normalize(side, _raw(message))))

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[TransportStreams]:
        async with self.inner as (read, write):
            pipes = _Pipes(0)
            from_client, to_client = pipes.from_client, pipes.to_client

            async def upstream() -> None:
                async with from_client:
                    async for item in from_client:
                        self._keep("client", item.message)
                        await write.send(item)

            async def downstream() -> None:
                async with to_client:
                    async for item in read:
                        if isinstance(item, SessionMessage):
                            self._keep("server", item.message)
                        await to_client.send(item)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(upstream)
                tasks.start_soon(downstream)
                try:
                    yield pipes.from_server, pipes.to_server
                finally:
                    tasks.cancel_scope.cancel()


class Replay(_Streams):
    """Plays a recording back with no server: each message the client sends must equal the next recorded client
    message (in stable form); the server messages recorded after it are then sent back. The first difference ends
    the session and is kept in `mismatch` as a unified diff."""

    def __init__(self, script: list[tuple[Side, RawMessage]]) -> None:
        super().__init__()
        self.script = script
        self.position = 0
        self.normalizer = Normalizer()
        self.mismatch: str | None = None

    def leftover(self) -> list[RawMessage]:
        """What the recording still expected the client to send."""
        return [m for side, m in self.script[self.position :] if side == "client"]

    async def _answer(self, sent: RawMessage, to_client: MemoryObjectSendStream[SessionMessage | Exception]) -> bool:
        stable = self.normalizer.normalize("client", sent)
        expected = self.script[self.position] if self.position < len(self.script) else None
        if expected is None or expected[0] != "client" or expected[1] != stable:
            recorded = expected[1] if expected is not None and expected[0] == "client" else None
            self.mismatch = diff(recorded, stable, self.position + 1)
            return False
        self.position += 1
        while self.position < len(self.script) and self.script[self.position][0] == "server":
            message = self.script[self.position][1].copy()
            self.position += 1
            self.normalizer.adopt(message)
            if "id" in message and "method" not in message:
                message["id"] = self.normalizer.client_id(message["id"])
            await to_client.send(SessionMessage(jsonrpc_message_adapter.validate_python(message)))
        return True

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[TransportStreams]:
        pipes = _Pipes(16)
        from_client, to_client = pipes.from_client, pipes.to_client

        async def play() -> None:
            # Ending `to_client` ends the session: the client's pending request fails, and the runner reports the diff.
            async with to_client, from_client:
                async for item in from_client:
                    if not await self._answer(_raw(item.message), to_client):
                        return

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(play)
            try:
                yield pipes.from_server, pipes.to_server
            finally:
                tasks.cancel_scope.cancel()
