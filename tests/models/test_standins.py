"""The model stand-ins are read by the providers' own SDKs through pydantic-ai as the real APIs would be."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterable, Iterator
from contextlib import AbstractAsyncContextManager

import httpx2
import pytest
from pydantic_ai import ModelRequest
from pydantic_ai.direct import model_request_stream
from pydantic_ai.exceptions import ModelHTTPError, ModelOverloadedError, ModelRateLimitError
from pydantic_ai.messages import (
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ToolCallPart,
    ToolCallPartDelta,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from tests.core_fixtures import DEADLINE_S
from tests.models.script import Fail, Gate, Hang, Recorded, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn

pytestmark = pytest.mark.anyio

PROVIDERS = ["openai", "anthropic", "google"]
KEYS = {"openai": "sk-openai-standin", "anthropic": "sk-ant-standin", "google": "AIza-standin"}
NAMES = {"openai": "gpt-standin", "anthropic": "claude-standin", "google": "gemini-standin"}
# Retries are the SDKs' (with backoff): none here, so an error test fails at once and takes one reply.
NO_RETRIES = ModelSettings(max_retries=0)
LOOKUP = ToolDefinition(
    name="lookup",
    description="Look an order up.",
    parameters_json_schema={"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
)


@pytest.fixture
def standin() -> Iterator[ModelStandIn]:
    with ModelStandIn() as server:
        yield server


def model_for(provider: str, standin: ModelStandIn, name: str | None = None) -> Model:
    name = name or NAMES[provider]
    if provider == "openai":
        return OpenAIChatModel(name, provider=OpenAIProvider(base_url=standin.openai_base_url, api_key=KEYS[provider]))
    if provider == "anthropic":
        anthropic = AnthropicProvider(base_url=standin.anthropic_base_url, api_key=KEYS[provider])
        return AnthropicModel(name, provider=anthropic)
    return GoogleModel(name, provider=GoogleProvider(base_url=standin.google_base_url, api_key=KEYS[provider]))


def ask(model: Model, prompt: str = "Where is order 42?") -> AbstractAsyncContextManager[StreamedResponse]:
    """A streamed request with instructions, a user prompt and one function tool."""
    messages = [ModelRequest.user_text_prompt(prompt, instructions="You answer about orders.")]
    parameters = ModelRequestParameters(function_tools=[LOOKUP])
    return model_request_stream(model, messages, model_settings=NO_RETRIES, model_request_parameters=parameters)


async def read_all(model: Model) -> tuple[list[ModelResponseStreamEvent], StreamedResponse]:
    async with ask(model) as stream:
        events = [event async for event in stream]
    return events, stream


def text_deltas(events: list[ModelResponseStreamEvent]) -> list[str]:
    """The text as it came, piece by piece: a part's start carries the first piece."""
    pieces = []
    for event in events:
        if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart) and event.part.content:
            pieces.append(event.part.content)
        elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
            pieces.append(event.delta.content_delta)
    return pieces


async def first_text(events: AsyncIterable[ModelResponseStreamEvent]) -> str:
    async for event in events:
        if pieces := text_deltas([event]):
            return pieces[0]
    raise AssertionError("the stream ended without text")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_text_thinking_and_a_tool_call_stream_through_the_sdk(standin: ModelStandIn, provider: str) -> None:
    standin.reply(
        Thinking("Order 42 "),
        Thinking("is known.", signature="sig-42"),
        Text("Let me "),
        Text("look."),
        ToolCall("lookup", {"order": "42"}),
        input_tokens=31,
        output_tokens=17,
    )
    events, stream = await read_all(model_for(provider, standin))
    response = stream.get()

    assert text_deltas(events) == ["Let me ", "look."]
    thinking, text, call = response.parts
    assert isinstance(thinking, ThinkingPart) and thinking.content == "Order 42 is known."
    assert isinstance(text, TextPart) and text.content == "Let me look."
    assert isinstance(call, ToolCallPart) and call.tool_name == "lookup" and call.args_as_dict() == {"order": "42"}
    assert (response.usage.input_tokens, response.usage.output_tokens) == (31, 17)
    if provider == "anthropic":
        assert thinking.signature == "sig-42"
    if provider != "google":  # Gemini sends a call whole
        fragments = [e for e in events if isinstance(e, PartDeltaEvent) and isinstance(e.delta, ToolCallPartDelta)]
        assert len(fragments) == 3
    recorded = standin.requests[0]
    assert recorded.ended.is_set() and not recorded.disconnected.is_set()


def system_prompt(recorded: Recorded) -> str:
    body = recorded.body
    if recorded.provider == "openai":
        assert body["messages"][0]["role"] == "system"
        return str(body["messages"][0]["content"])
    if recorded.provider == "anthropic":
        return "".join(block["text"] for block in body["system"])
    return "".join(part["text"] for part in body["systemInstruction"]["parts"])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_request_carries_the_instructions_the_tool_and_the_key(standin: ModelStandIn, provider: str) -> None:
    standin.reply(Text("Shipped."))
    await read_all(model_for(provider, standin))

    recorded = await standin.request_async(0)
    assert recorded.provider == provider and recorded.model == NAMES[provider]
    assert system_prompt(recorded) == "You answer about orders."
    assert "Where is order 42?" in str(recorded.body)
    assert "lookup" in str(recorded.body)
    key_headers = {"openai": "authorization", "anthropic": "authorization", "google": "x-goog-api-key"}
    assert recorded.headers[key_headers[provider]].removeprefix("Bearer ") == KEYS[provider]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_status_is_a_model_http_error_with_the_providers_message(
    standin: ModelStandIn, provider: str
) -> None:
    standin.reply(Fail(401, "Incorrect API key provided."))
    with pytest.raises(ModelHTTPError) as raised:
        await read_all(model_for(provider, standin))
    assert raised.value.status_code == 401
    assert "Incorrect API key provided." in str(raised.value.body)
    assert len(standin.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_is_a_rate_limit_error_with_retry_after(standin: ModelStandIn, provider: str) -> None:
    standin.reply(Fail(429, "Slow down.", retry_after=7))
    with pytest.raises(ModelRateLimitError) as raised:
        await read_all(model_for(provider, standin))
    assert isinstance(raised.value, ModelHTTPError) and raised.value.status_code == 429
    assert raised.value.retry_after == 7


async def test_anthropic_529_is_an_overloaded_error_in_anthropics_shape(standin: ModelStandIn) -> None:
    standin.reply(Fail(529, "Overloaded"))
    with pytest.raises(ModelOverloadedError) as raised:
        await read_all(model_for("anthropic", standin))
    assert isinstance(raised.value, ModelHTTPError) and raised.value.status_code == 529
    assert raised.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_failure_after_the_stream_opened_is_an_error_in_the_stream(
    standin: ModelStandIn, provider: str
) -> None:
    standin.reply(Text("Let me "), Fail(500, "The model broke down."))
    async with ask(model_for(provider, standin)) as stream:
        assert await first_text(stream) == "Let me "
        with pytest.raises(ModelHTTPError) as raised:
            async for _ in stream:
                pass
    assert raised.value.in_stream
    assert "The model broke down." in str(raised.value.body)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_gate_holds_the_stream_until_released(standin: ModelStandIn, provider: str) -> None:
    gate = Gate()
    reply = standin.reply(Text("Let me "), gate, Text("look."))
    async with ask(model_for(provider, standin)) as stream:
        assert await first_text(stream) == "Let me "
        await gate.reached.wait_async()
        recorded = await reply.served_async()
        assert not recorded.ended.is_set()  # held at the gate: the rest is not sent yet
        gate.release()
        rest = [event async for event in stream]
    assert text_deltas(rest) == ["look."]
    assert stream.get().parts[-1] == TextPart("Let me look.")


# Not Google: see test_a_google_stream_left_early_closes_with_the_http_client_it_was_given.
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_leaving_the_stream_early_is_recorded_as_a_disconnect(standin: ModelStandIn, provider: str) -> None:
    hang = Hang()
    reply = standin.reply(Text("Let me "), hang, Text("never sent"))
    async with ask(model_for(provider, standin)) as stream:
        assert await first_text(stream) == "Let me "
        await hang.reached.wait_async()
    recorded = await reply.served_async()
    await recorded.disconnected.wait_async()
    await recorded.ended.wait_async()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])  # not Google: as above
async def test_cancelling_the_reader_mid_stream_is_recorded_as_a_disconnect(
    standin: ModelStandIn, provider: str
) -> None:
    hang = Hang()
    reply = standin.reply(Text("Let me "), hang, Text("never sent"))
    seen = asyncio.Event()

    async def reader() -> None:
        async with ask(model_for(provider, standin)) as stream:
            await first_text(stream)
            seen.set()
            async for _ in stream:
                pass

    task = asyncio.create_task(reader())
    await seen.wait()
    await hang.reached.wait_async()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await (await reply.served_async()).disconnected.wait_async()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])  # not Google: as above
async def test_a_request_cancelled_before_the_first_chunk_closes_the_stream(
    standin: ModelStandIn, provider: str
) -> None:
    hang = Hang()
    standin.reply(hang)

    async def request() -> None:
        await read_all(model_for(provider, standin))

    task = asyncio.create_task(request())
    await hang.reached.wait_async()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await (await standin.request_async(0)).disconnected.wait_async()


async def test_a_google_stream_left_early_closes_with_the_http_client_it_was_given(standin: ModelStandIn) -> None:
    """Leaving the stream is not enough for Google: pydantic-ai closes google-genai's stream, but google-genai's
    generators wrap each other with `async for`, which does not close the inner one holding the HTTP response (it
    stays open until garbage collected; a cancelled reader closes it only if it was waiting on the socket). Closing
    the HTTP client the provider was given does close it."""
    hang = Hang()
    reply = standin.reply(Text("Let me "), hang, Text("never sent"))
    async with httpx2.AsyncClient(timeout=DEADLINE_S) as client:
        provider = GoogleProvider(base_url=standin.google_base_url, api_key=KEYS["google"], http_client=client)
        async with ask(GoogleModel(NAMES["google"], provider=provider)) as stream:
            assert await first_text(stream) == "Let me "
            await hang.reached.wait_async()
    await (await reply.served_async()).disconnected.wait_async()


async def test_a_reply_queued_for_a_model_name_goes_to_that_model_only(standin: ModelStandIn) -> None:
    standin.reply(Text("for anyone"))
    standin.reply(Text("for the reviewer"), model="gpt-reviewer")
    reviewer, writer = model_for("openai", standin, "gpt-reviewer"), model_for("openai", standin, "gpt-writer")

    writer_events, _ = await read_all(writer)  # the reviewer's own reply is not the writer's
    reviewer_events, _ = await read_all(reviewer)

    assert text_deltas(writer_events) == ["for anyone"]
    assert text_deltas(reviewer_events) == ["for the reviewer"]
    assert [r.model for r in standin.requests] == ["gpt-writer", "gpt-reviewer"]
    assert standin.unused() == []


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_request_with_no_reply_queued_fails_saying_so(standin: ModelStandIn, provider: str) -> None:
    standin.reply(Text("only for another model"), model="other")
    with pytest.raises(ModelHTTPError) as raised:
        await read_all(model_for(provider, standin))
    assert raised.value.status_code == 400
    assert f"no reply queued for model '{NAMES[provider]}'" in str(raised.value.body)
    assert len(standin.unused()) == 1


def test_a_test_in_another_thread_waits_for_the_request_and_holds_the_stream(standin: ModelStandIn) -> None:
    """As a hub-level test does: the model is read in another thread (the hub's), the test blocks on signals."""
    gate = Gate()
    reply = standin.reply(Text("Let me "), gate, Text("look."), model="claude-standin")
    seen: list[str] = []
    read = threading.Event()

    async def reader() -> None:
        async with ask(model_for("anthropic", standin)) as stream:
            seen.append(await first_text(stream))
            read.set()
            seen.extend(text_deltas([event async for event in stream]))

    thread = threading.Thread(target=asyncio.run, args=(reader(),))
    thread.start()
    assert standin.request(0) is reply.served()
    gate.reached.wait()
    assert read.wait(DEADLINE_S) and seen == ["Let me "]
    gate.release()
    standin.request(0).ended.wait()
    thread.join(DEADLINE_S)
    assert seen == ["Let me ", "look."]


async def test_closing_the_stand_in_ends_a_stream_still_held_at_a_gate(standin: ModelStandIn) -> None:
    """A test that fails while a gate holds a stream must not hang its teardown."""
    gate = Gate()
    reply = standin.reply(Text("Let me "), gate, Text("never sent"))
    async with ask(model_for("openai", standin)) as stream:
        assert await first_text(stream) == "Let me "
        await gate.reached.wait_async()
        await asyncio.to_thread(standin.close)
    recorded = await reply.served_async()
    assert recorded.ended.is_set() and not recorded.disconnected.is_set()
