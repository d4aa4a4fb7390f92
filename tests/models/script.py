"""What a test scripts a model stand-in to answer (replies made of steps), and the signals it waits on."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.core_fixtures import DEADLINE_S


class Signal:
    """A flag set once, from any thread, and waited for from any thread (blocking) or any event loop (awaiting).

    The stand-in runs on uvicorn's loop in a thread of its own while a test waits in its own thread or loop, so
    neither `threading.Event` (blocks a loop) nor `asyncio.Event` (bound to one loop) serves both."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._lock = threading.Lock()
        self._flag = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def set(self) -> None:
        with self._lock:
            self._flag.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(_resolve, future)

    def is_set(self) -> bool:
        return self._flag.is_set()

    def wait(self, timeout: float = DEADLINE_S) -> None:
        """Block until set; the deadline only ends a test that would hang."""
        if not self._flag.wait(timeout):
            raise TimeoutError(f"never happened: {self.what}")

    async def wait_async(self) -> None:
        """Await until set; the deadline only ends a test that would hang."""
        try:
            async with asyncio.timeout(DEADLINE_S):
                await self.until()
        except TimeoutError:
            raise TimeoutError(f"never happened: {self.what}") from None

    async def until(self) -> None:
        """Await until set, however long that takes (the stand-in holding a stream for a test)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._flag.is_set():
                return
            self._waiters.append((loop, future))
        try:
            await future
        finally:
            with self._lock:
                if (loop, future) in self._waiters:
                    self._waiters.remove((loop, future))


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(frozen=True)
class Text:
    """One streamed piece of the answer's text."""

    text: str


@dataclass(frozen=True)
class Thinking:
    """One streamed piece of thinking. Consecutive pieces form one thinking block; Anthropic closes the block with
    the `signature` of its last piece (OpenAI-compatible servers stream it as `reasoning_content`)."""

    text: str
    signature: str = "standin-signature"


@dataclass(frozen=True)
class ToolCall:
    """A call of `name`. OpenAI and Anthropic stream its arguments in `pieces` fragments; Gemini sends it whole.
    `args` given as a string is sent as written (to script arguments that are not JSON: OpenAI and Anthropic only).
    `id` defaults to one made from the request's number and the call's position."""

    name: str
    args: dict[str, Any] | str
    id: str | None = None
    pieces: int = 3

    @property
    def arguments(self) -> str:
        return self.args if isinstance(self.args, str) else json.dumps(self.args)

    def fragments(self) -> list[str]:
        whole = self.arguments
        size = max(1, -(-len(whole) // max(1, self.pieces)))
        return [whole[i : i + size] for i in range(0, len(whole), size)] or [""]


@dataclass(frozen=True)
class Fail:
    """The request fails. As a reply's first step: an HTTP error in the provider's error JSON, with a `Retry-After`
    header when `retry_after` is set. After the stream opened: the provider's in-stream error event."""

    status: int
    message: str = "The stand-in failed this request."
    retry_after: int | None = None


@dataclass(eq=False)
class Gate:
    """Holds the stream here until the test calls `release()`. `reached` is set when the stream got here, so a test
    can assert what a reader already saw before it lets the rest go."""

    reached: Signal = field(default_factory=lambda: Signal("the stream reached the gate"))
    released: Signal = field(default_factory=lambda: Signal("the test released the gate"))

    def release(self) -> None:
        self.released.set()


@dataclass(eq=False)
class Hang:
    """The stream stays open and sends nothing more, until the client goes away. `reached` as for `Gate`."""

    reached: Signal = field(default_factory=lambda: Signal("the stream reached the hang"))


Step = Text | Thinking | ToolCall | Fail | Gate | Hang
Content = Text | Thinking | ToolCall


@dataclass(eq=False)
class Reply:
    """One scripted answer: its steps in order, the usage it reports, and `delay_s` between content chunks (for the
    benchmark; tests hold a stream with a `Gate`, never with a delay). `model` set: only a request for that model
    name takes it."""

    steps: tuple[Step, ...]
    model: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5
    delay_s: float = 0.0
    taken: Signal = field(default_factory=lambda: Signal("a request took the reply"))
    request: Recorded | None = None  # the request that took it, once `taken`

    def served(self, timeout: float = DEADLINE_S) -> Recorded:
        """The request that took this reply, once one did (blocking)."""
        self.taken.wait(timeout)
        assert self.request is not None
        return self.request

    async def served_async(self) -> Recorded:
        await self.taken.wait_async()
        assert self.request is not None
        return self.request


@dataclass(eq=False)
class Recorded:
    """One request as the stand-in received it. `disconnected` is set when the client closed the stream before the
    reply's last event was sent (a stop closed the upstream stream); `ended` when the stand-in is done with it,
    either way."""

    index: int
    provider: str  # "openai" | "anthropic" | "google"
    path: str
    model: str
    headers: dict[str, str]  # names lowercased
    body: dict[str, Any]
    disconnected: Signal
    ended: Signal
