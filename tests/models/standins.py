"""A stand-in of the model providers' APIs for tests: OpenAI chat completions, Anthropic Messages and Gemini
`streamGenerateContent`, each streamed in the provider's own wire format for its own SDK to read.

One `ModelStandIn` serves all three on 127.0.0.1 (uvicorn in a thread). Point a model at it:

    with ModelStandIn() as standin:
        OpenAIProvider(base_url=standin.openai_base_url, api_key="sk-test")     # POST /v1/chat/completions
        AnthropicProvider(base_url=standin.anthropic_base_url, api_key="...")   # POST /v1/messages
        GoogleProvider(base_url=standin.google_base_url, api_key="...")         # POST /v1beta/models/{m}:stream...

Script each answer before the request comes: `standin.reply(*steps, ...)` queues one `Reply` on the stand-in's
FIFO; `standin.reply(*steps, model="name")` on the FIFO of that model name, which a request naming it takes from
before the shared one (so two agents on two models are told apart). Every request takes one reply, a retry of the
SDK's included. Steps (from `tests.models.script`):

    Text("Hel"), Text("lo")            # text deltas, one event each
    Thinking("Let me see")             # thinking (Anthropic: a block closed with a signature_delta)
    ToolCall("lookup", {"q": "x"})     # a tool call; OpenAI and Anthropic stream its arguments in `pieces` fragments
    Fail(429, "Slow down", retry_after=3)   # first step: an HTTP error in the provider's error JSON;
                                            # later: the provider's in-stream error event, and the stream ends
    gate = Gate()                      # holds the stream until `gate.release()`; `gate.reached` says it got there
    Hang()                             # the stream stays open, silent, until the client goes away

    gate = Gate()
    reply = standin.reply(Text("Hel"), gate, Text("lo"), input_tokens=12, output_tokens=2)
    ...                                # start the request
    gate.reached.wait()                # "Hel" was sent; assert a reader already has it
    gate.release()                     # the rest follows

`reply(...)` also takes `input_tokens=` and `output_tokens=` (the usage reported; 10 and 5 by default) and
`delay_s=`, which spaces a reply's content steps (for the benchmark only: tests hold streams with gates, never with
time). A request with no reply queued for it fails with a 400 that says so; `standin.unused()` lists the replies
no request took.

What was sent: `standin.requests` lists each `Recorded` request in arrival order (provider, path, model name,
lowercased headers, JSON body). Wait for one with `standin.request(n)` (blocking, n from 0) or
`await standin.request_async(n)`, or for the one that took a given reply with `reply.served()` /
`await reply.served_async()`. `recorded.disconnected` (a `Signal`: `.wait()`, `await .wait_async()`, `.is_set()`)
is set when the client closed the stream before the reply's last event, which is what a stop must do; only a
reply held by a `Gate` or `Hang` (or slowed by `delay_s`) is reliably still streaming when the client leaves.
`recorded.ended` is set when the stand-in is done with the request either way. (Google's SDK keeps the HTTP stream
open after pydantic-ai's stream is left: see `test_standins.py`.)
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tests.conftest import ServedInThread
from tests.core_fixtures import DEADLINE_S
from tests.models.anthropic_wire import AnthropicWire
from tests.models.google_wire import GoogleWire
from tests.models.openai_wire import OpenAIWire
from tests.models.script import Fail, Gate, Hang, Recorded, Reply, Signal, Step
from tests.models.sse import Wire

WIRES: dict[str, type[Wire]] = {"openai": OpenAIWire, "anthropic": AnthropicWire, "google": GoogleWire}


class ModelStandIn:
    """The three providers' streaming APIs on one server, answering with the replies a test queued."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shared: deque[Reply] = deque()
        self._by_model: dict[str, deque[Reply]] = {}
        self._arrivals: dict[int, Signal] = {}
        self._closing = Signal("the stand-in is closing")
        self.requests: list[Recorded] = []
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1beta/models/{model}:streamGenerateContent", self._google, methods=["POST"]),
            ]
        )
        self._server = ServedInThread(app)
        self.url = self._server.url
        self.openai_base_url = f"{self.url}/v1"
        self.anthropic_base_url = self.url  # the Anthropic SDK adds /v1/messages
        self.google_base_url = self.url  # the Google SDK adds /v1beta/models/...

    def reply(
        self,
        *steps: Step,
        model: str | None = None,
        input_tokens: int = 10,
        output_tokens: int = 5,
        delay_s: float = 0.0,
    ) -> Reply:
        """Queue the answer to a coming request: for a request naming `model` when set, else for any request."""
        reply = Reply(steps, model, input_tokens, output_tokens, delay_s)
        with self._lock:
            queue = self._shared if model is None else self._by_model.setdefault(model, deque())
            queue.append(reply)
        return reply

    def unused(self) -> list[Reply]:
        """The queued replies no request took."""
        with self._lock:
            return [*self._shared, *(reply for queue in self._by_model.values() for reply in queue)]

    def request(self, n: int, timeout: float = DEADLINE_S) -> Recorded:
        """Request `n` (from 0, in arrival order), once it arrived (blocking)."""
        self._arrival(n).wait(timeout)
        return self.requests[n]

    async def request_async(self, n: int) -> Recorded:
        await self._arrival(n).wait_async()
        return self.requests[n]

    def close(self) -> None:
        """Stop serving; streams held by a gate or a hang end first, so that the server can stop."""
        self._closing.set()
        self._server.stop()

    def __enter__(self) -> ModelStandIn:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _arrival(self, n: int) -> Signal:
        with self._lock:
            return self._arrivals.setdefault(n, Signal(f"model request {n} arrived"))

    async def _openai(self, request: Request) -> Response:
        body = await request.json()
        return self._answer("openai", request, body, str(body.get("model", "")), body.get("stream") is True)

    async def _anthropic(self, request: Request) -> Response:
        body = await request.json()
        return self._answer("anthropic", request, body, str(body.get("model", "")), body.get("stream") is True)

    async def _google(self, request: Request) -> Response:
        body = await request.json()
        streamed = request.query_params.get("alt") == "sse"
        return self._answer("google", request, body, request.path_params["model"], streamed)

    def _answer(self, provider: str, request: Request, body: Any, model: str, streamed: bool) -> Response:
        wire = WIRES[provider]
        with self._lock:
            recorded = Recorded(
                index=len(self.requests),
                provider=provider,
                path=request.url.path,
                model=model,
                headers={name.lower(): value for name, value in request.headers.items()},
                body=body,
                disconnected=Signal(f"the client closed model request {len(self.requests)} early"),
                ended=Signal(f"model request {len(self.requests)} ended"),
            )
            self.requests.append(recorded)
            queue = self._by_model.get(model) or self._shared
            reply = queue.popleft() if queue and streamed else None
        self._arrival(recorded.index).set()
        if not streamed or reply is None:
            recorded.ended.set()
            refusal = "answers streamed requests only" if not streamed else f"has no reply queued for model {model!r}"
            return JSONResponse(wire.error_body(Fail(400, f"The stand-in {refusal}.")), 400)
        reply.request = recorded
        reply.taken.set()
        first = reply.steps[0] if reply.steps else None
        if isinstance(first, Fail):
            recorded.ended.set()
            headers = {"retry-after": str(first.retry_after)} if first.retry_after is not None else None
            return JSONResponse(wire.error_body(first), first.status, headers=headers)
        return _Stream(wire(reply, recorded), reply, recorded, self._closing)


class _Stream(Response):
    """A reply streamed as server-sent events, watching for the client to go away while it streams or waits."""

    def __init__(self, wire: Wire, reply: Reply, recorded: Recorded, closing: Signal) -> None:
        # Not Response.__init__: it would declare a Content-Length for the empty body it renders.
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
        self.wire = wire
        self.reply = reply
        self.recorded = recorded
        self.closing = closing
        self.sent_all = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sender = asyncio.create_task(self._send(send))
        watcher = asyncio.create_task(_client_gone(receive))
        try:
            await asyncio.wait({sender, watcher}, return_when=asyncio.FIRST_COMPLETED)
            failed = sender.exception() if sender.done() else None
            if failed is not None and not isinstance(failed, OSError):
                raise failed
            # Left before the sender finished (uvicorn raises an OSError, ClientDisconnected, on a write after the
            # client left), and before the reply's last event: a client that reads to the end may close at once.
            if (failed is not None or not sender.done()) and not self.sent_all:
                self.recorded.disconnected.set()
        finally:
            for task in (sender, watcher):
                task.cancel()
            await asyncio.gather(sender, watcher, return_exceptions=True)
            self.recorded.ended.set()

    async def _send(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        async for event in self._events():
            await send({"type": "http.response.body", "body": event.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _events(self) -> AsyncIterator[str]:
        for event in self.wire.opening():
            yield event
        started = False
        for step in self.reply.steps:
            if isinstance(step, Gate | Hang):
                step.reached.set()
                await _first(self.closing, step.released if isinstance(step, Gate) else None)
                if self.closing.is_set():
                    return  # the stand-in closes: the stream ends unfinished
            elif isinstance(step, Fail):
                for event in self.wire.failure(step):
                    yield event
                self.sent_all = True
                return
            else:
                if started and self.reply.delay_s:
                    await asyncio.sleep(self.reply.delay_s)
                started = True
                for event in self.wire.content(step):
                    yield event
        for event in self.wire.closing():
            yield event
        self.sent_all = True


async def _client_gone(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _first(*signals: Signal | None) -> None:
    """Until the first of `signals` is set."""
    waits = [asyncio.create_task(signal.until()) for signal in signals if signal is not None]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
