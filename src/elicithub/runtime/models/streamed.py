"""A provider's model behind the seam: one streamed request per turn (pydantic-ai's direct requests), its pieces
passed on as they come, retried before its first token, its failures named, its tokens counted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from elicithub import telemetry
from elicithub.config import ModelEntry
from elicithub.core import jsoncodec
from elicithub.core.events import TokenUsage
from elicithub.core.runs import ToolCall
from elicithub.errors import HubError
from elicithub.runtime.models import providers
from elicithub.runtime.models.seam import ModelRequest, ModelTurn, Sink, Status, ToolSpec, Unreadable, read_arguments

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models import Model as PydanticModel

log = logging.getLogger(__name__)

RETRIED = frozenset({408, 409, 429, 529})
"""Statuses worth another try (with every 5xx): the provider is busy or the request raced another."""
BACKOFF_S = 0.5
BACKOFF_MAX_S = 8.0
RETRY_AFTER_MAX_S = 60.0
NOW_S = 0.1
YIELD_S = 0.001
"""A turn streaming chunks that came together lets its readers run at least this often."""
"""A wait shorter than this is said as "now"."""


class Meter(Protocol):
    """Where a model's usage is counted (metrics.py's Metrics)."""

    def model_tokens(self, model: str, agent: str, input_tokens: int, output_tokens: int) -> None: ...

    def model_request(self, model: str, outcome: str) -> None: ...

    def model_first_token(self, model: str, seconds: float) -> None: ...


class ModelFailed(HubError):
    """A model's request failed for good: the message names the model, the provider's status and its words."""


class ProviderModel:
    """One `models:` entry. Its pydantic-ai model (and the provider's SDK) is made on first use."""

    def __init__(self, entry: ModelEntry, meter: Meter | None = None) -> None:
        self.entry = entry
        self.name = entry.id
        self._meter = meter
        self._model: PydanticModel | None = None

    @property
    def context_tokens(self) -> int:
        return self.entry.context_tokens or providers.DEFAULT_CONTEXT_TOKENS

    @property
    def max_tokens(self) -> int:
        return self.entry.settings.max_tokens or 0

    def _built(self) -> PydanticModel:
        if self._model is None:
            self._model = providers.build(self.entry)
        return self._model

    async def turn(self, request: ModelRequest, sink: Sink, status: Status) -> ModelTurn:
        attempt = 0
        while True:
            started = time.monotonic()
            streamed = _Streamed(sink, request.tools)
            try:
                with telemetry.model_request(self.entry.provider, self.entry.model) as span:
                    response = await self._request(request, streamed, started)
                    usage = response.usage
                    span.note("gen_ai.usage.input_tokens", usage.input_tokens)
                    span.note("gen_ai.usage.output_tokens", usage.output_tokens)
            except asyncio.CancelledError:
                raise
            except providers.MissingKey as exc:
                self._count("error")
                raise ModelFailed(str(exc)) from None
            except Exception as exc:
                wait = None if streamed.any else self._retry_wait(exc, attempt)
                if wait is None:
                    self._count("error")
                    raise ModelFailed(self._failure(exc)) from None
                self._count("retried")
                attempt += 1
                when = "now" if wait < NOW_S else f"in {_seconds(wait)}"
                await status(f"Model {self.name} is busy; retrying {when}.")
                await asyncio.sleep(wait)
                continue
            self._count("ok")
            if self._meter is not None:
                self._meter.model_tokens(self.name, request.agent, usage.input_tokens, usage.output_tokens)
            return replace(_turn(response, request), usage=TokenUsage(usage.input_tokens, usage.output_tokens))

    async def _request(self, request: ModelRequest, streamed: _Streamed, started: float) -> ModelResponse:
        from pydantic_ai.direct import model_request_stream

        messages = providers.messages(request.messages, request.instructions)
        parameters = providers.parameters(request.tools)
        settings: Any = providers.settings(self.entry)
        async with asyncio.timeout(self.entry.timeout_s), contextlib.AsyncExitStack() as closing:
            if providers.per_request(self.entry):
                import httpx2

                client = await closing.enter_async_context(httpx2.AsyncClient(timeout=self.entry.timeout_s))
                model = providers.build(self.entry, client)
            else:
                model = self._built()
            stream = await closing.enter_async_context(
                model_request_stream(model, messages, model_settings=settings, model_request_parameters=parameters)
            )
            loop = asyncio.get_running_loop()
            yielded = loop.time()
            async for event in stream:
                if streamed.take(event) and self._meter is not None:
                    self._meter.model_first_token(self.name, time.monotonic() - started)
                if loop.time() - yielded > YIELD_S:
                    # Chunks that came in one read are handed over without a pause: let readers have them.
                    await asyncio.sleep(0)
                    yielded = loop.time()
            return stream.get()

    def _retry_wait(self, exc: Exception, attempt: int) -> float | None:
        """How long to wait before the next try, or None when this failure is final."""
        from pydantic_ai.exceptions import ModelAPIError, ModelConnectionError, ModelHTTPError, ModelRequestTimeout

        if attempt >= self.entry.max_retries or isinstance(exc, TimeoutError | ModelRequestTimeout):
            return None
        if isinstance(exc, ModelHTTPError):
            if exc.status_code not in RETRIED and exc.status_code < 500:
                return None
        elif not isinstance(exc, ModelConnectionError):
            return None
        after: float | None = exc.retry_after if isinstance(exc, ModelAPIError) else None
        if after is not None:
            return float(min(max(float(after), 0.0), RETRY_AFTER_MAX_S))
        backoff = min(BACKOFF_S * 2.0**attempt, BACKOFF_MAX_S)
        return float(backoff / 2 + random.uniform(0, backoff / 2))

    def _failure(self, exc: Exception) -> str:
        """`Model gpt failed: 401 Incorrect API key provided.`: never the key, whatever the provider echoed."""
        from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, ModelRequestTimeout

        if isinstance(exc, TimeoutError | ModelRequestTimeout):
            said = f"no complete answer within {_seconds(self.entry.timeout_s)}."
        elif isinstance(exc, ModelHTTPError):
            said = f"{exc.status_code} {_words(exc)}"
        elif isinstance(exc, ModelAPIError):
            said = _words(exc)
        else:
            log.warning("model %s failed", self.name, exc_info=exc)
            said = f"{type(exc).__name__}: {exc}"
        key = providers.api_key(self.entry)
        if key:
            said = said.replace(key, "***")
        return f"Model {self.name} failed: {said}"

    def _count(self, outcome: str) -> None:
        if self._meter is not None:
            self._meter.model_request(self.name, outcome)


class _Streamed:
    """One request's events passed on to the sink: pieces of text, of thinking, of a call's arguments (the call
    named as its `ToolCall` will be, SERVER.TOOL, not as the provider was sent it)."""

    def __init__(self, sink: Sink, tools: list[ToolSpec]) -> None:
        self.sink = sink
        self.tools = tools
        self.any = False
        self._calls: dict[int, tuple[str, str]] = {}

    def take(self, event: object) -> bool:
        """Pass `event` on; whether it was the request's first piece."""
        from pydantic_ai.messages import (
            PartDeltaEvent,
            PartStartEvent,
            TextPart,
            TextPartDelta,
            ThinkingPart,
            ThinkingPartDelta,
            ToolCallPart,
            ToolCallPartDelta,
        )

        first = not self.any
        if isinstance(event, PartStartEvent):
            part = event.part
            if isinstance(part, TextPart):
                self.sink.add_text(part.content)
            elif isinstance(part, ThinkingPart):
                self.sink.add_reasoning(part.content)
            elif isinstance(part, ToolCallPart):
                name = self._name(part.tool_name)
                self._calls[event.index] = (part.tool_call_id, name)
                args = part.args_as_json_str() if part.args else ""
                self.sink.add_tool_input(part.tool_call_id, name, args)
            else:
                return False
        elif isinstance(event, PartDeltaEvent):
            delta = event.delta
            if isinstance(delta, TextPartDelta):
                self.sink.add_text(delta.content_delta)
            elif isinstance(delta, ThinkingPartDelta):
                self.sink.add_reasoning(delta.content_delta or "")
            elif isinstance(delta, ToolCallPartDelta):
                wire = delta.tool_name_delta or ""
                call_id, name = self._calls.get(event.index, (delta.tool_call_id or "", self._name(wire)))
                self.sink.add_tool_input(call_id, name, _args(delta.args_delta))
            else:
                return False
        else:
            return False
        self.any = True
        return first

    def _name(self, wire: str) -> str:
        return providers.our_name(wire, self.tools) if wire else ""


def _args(args: str | dict[str, Any] | None) -> str:
    if args is None:
        return ""
    return args if isinstance(args, str) else jsoncodec.dumps(args)


def _turn(response: ModelResponse, request: ModelRequest) -> ModelTurn:
    """What a request's whole answer says, in the run loop's terms."""
    from pydantic_ai.messages import TextPart, ThinkingPart, ToolCallPart

    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    thinking = [p for p in response.parts if isinstance(p, ThinkingPart)]
    calls = []
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            name = providers.our_name(part.tool_name, request.tools)
            try:
                # As the model wrote them: pydantic-ai wraps text that is not JSON (`{"INVALID_JSON": ...}`).
                written = part.args if isinstance(part.args, str) else part.args_as_json_str()
                calls.append(ToolCall(part.tool_call_id, name, read_arguments(name, written or "{}")))
            except Unreadable as exc:
                # Never made with arguments it was not given: the model is told why, as the call's error.
                error = f"{exc} The tool was not called; call it again."
                calls.append(ToolCall(part.tool_call_id, name, {}, error=error))
    signature = next((p.signature for p in thinking if p.signature), None)
    return ModelTurn(
        text=text or None,
        tool_calls=calls,
        reasoning="".join(p.content for p in thinking),
        reasoning_signature=signature,
    )


def _words(exc: Exception) -> str:
    """What the provider said went wrong: its error body's message where it has one."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    message = getattr(exc, "message", None) or str(exc)
    return str(message).split(", body:", 1)[0]


def _seconds(value: float) -> str:
    return f"{round(value)} s" if value >= 1 else f"{value:.1f} s"
