"""HubClient against a real hub (uvicorn on 127.0.0.1) and real MCP servers: typed events, answers, follow, errors."""

from __future__ import annotations

import anyio
import pytest

from elicithub.clients.hub import (
    ElicitationRequest,
    ElicitationResolved,
    Event,
    HubClient,
    ModelStatus,
    RawEvent,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
)
from elicithub.errors import (
    AlreadyResolved,
    ConversationNotFound,
    ElicitationNotFound,
    HubUnreachable,
    InvalidContent,
    Unauthorized,
)
from tests.conftest import HubFactory, RunningHub, free_port
from tests.models.hubs import standin_models
from tests.models.script import Fail, Gate, Thinking
from tests.models.script import Text as TextStep
from tests.models.script import ToolCall as ToolCallStep
from tests.models.standins import ModelStandIn

pytestmark = pytest.mark.anyio
PROVISION = '/call mrtr.provision {"name": "orders"}'


async def test_a_chat_yields_typed_events_and_an_answer_resumes_it(hub: RunningHub) -> None:
    events: list[Event] = []
    async with HubClient(hub.url, token="alice-secret") as client:
        with anyio.fail_after(30):
            async for event in client.chat(PROVISION, "chat-1"):
                events.append(event)
                if isinstance(event, ElicitationRequest):
                    assert await client.answer(event.elicitation_id, "accept", {"region": "eu-west-1"}) == "accepted"
    assert client.conversation_id == "chat-1"
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, call.arguments) == ("mrtr.provision", {"name": "orders"})
    [asked] = [e for e in events if isinstance(e, ElicitationRequest)]
    assert (asked.mode, asked.message, asked.conversation_id) == (
        "form",
        "Which region should orders live in?",
        "chat-1",
    )
    assert asked.requested_schema is not None and asked.requested_schema["required"] == ["region"]
    assert asked.context["serverId"] == "mrtr" and asked.raw["elicitationId"] == asked.elicitation_id
    assert ElicitationResolved(asked.elicitation_id, "accepted") in events
    assert ToolResult(call.call_id, "Provisioned orders in eu-west-1.") in events
    assert "".join(e.text for e in events if isinstance(e, Text)) == "Provisioned orders in eu-west-1."
    # Parts this client has no type for pass through as they were sent.
    raw = [e.data["type"] for e in events if isinstance(e, RawEvent)]
    assert raw[0] == "start" and raw[-1] == "finish" and "start-step" in raw


async def test_a_streamed_turn_comes_as_its_pieces_thinking_apart_and_a_retry_said(
    make_hub: HubFactory, model_standin: ModelStandIn
) -> None:
    hub = make_hub(**standin_models(model_standin, "anthropic"))
    gate = Gate()
    model_standin.reply(Fail(429, "Overloaded.", retry_after=0))
    model_standin.reply(
        Thinking("Echo "),
        Thinking("it."),
        TextStep("Let me "),
        TextStep("echo."),
        gate,
        ToolCallStep("legacy__echo", {"text": "hi"}),
    )
    model_standin.reply(TextStep("Echoed."))
    events: list[Event] = []
    async with HubClient(hub.url, token="alice-secret") as client:
        with anyio.fail_after(30):
            async for event in client.chat("hi", "chat-streamed"):
                events.append(event)
                if isinstance(event, Text):
                    gate.release()  # read live: the call's arguments are to come
    assert [e for e in events if isinstance(e, ModelStatus)] == [ModelStatus("Model gpt is busy; retrying now.")]
    assert "".join(e.text for e in events if isinstance(e, Reasoning)) == "Echo it."
    assert "".join(e.text for e in events if isinstance(e, Text)) == "Let me echo.Echoed."
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, call.arguments) == ("legacy.echo", {"text": "hi"})
    # The call's arguments as the model wrote them pass through as they were sent.
    raw = [e.data for e in events if isinstance(e, RawEvent)]
    started = [p for p in raw if p["type"] == "tool-input-start"]
    assert [p["toolName"] for p in started] == ["legacy.echo"]
    assert "".join(p["inputTextDelta"] for p in raw if p["type"] == "tool-input-delta") == '{"text": "hi"}'


async def test_answer_errors_are_the_package_errors(hub: RunningHub) -> None:
    async with HubClient(hub.url, token="alice-secret") as client:
        with anyio.fail_after(30):
            async for event in client.chat(PROVISION):
                if isinstance(event, ElicitationRequest):
                    with pytest.raises(InvalidContent) as invalid:
                        await client.answer(event.elicitation_id, "accept", {"region": "mars"})
                    assert [(e.field, e.message) for e in invalid.value.errors] == [
                        ("region", "must be one of: us-east-1, eu-west-1")
                    ]
                    assert await client.answer(event.elicitation_id, "decline") == "declined"
                    assert await client.answer(event.elicitation_id, "decline") == "declined"  # the same answer again
                    with pytest.raises(AlreadyResolved):
                        await client.answer(event.elicitation_id, "accept", {"region": "eu-west-1"})
                    with pytest.raises(ElicitationNotFound):
                        await client.answer("eli_nope", "decline")


async def test_follow_reads_the_active_run_nothing_after_it_and_refuses_an_unknown_conversation(
    hub: RunningHub,
) -> None:
    async with HubClient(hub.url, token="alice-secret") as first, HubClient(hub.url, token="alice-secret") as second:
        with pytest.raises(ConversationNotFound):
            [e async for e in second.follow("chat-2")]
        asked = anyio.Event()
        followed: list[Event] = []

        async def chat() -> None:
            async for event in first.chat(PROVISION, "chat-2"):
                if isinstance(event, ElicitationRequest):
                    asked.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(chat)
                await asked.wait()
                async for event in second.follow("chat-2"):
                    followed.append(event)
                    if isinstance(event, ElicitationRequest):
                        await second.answer(event.elicitation_id, "accept", {"region": "us-east-1"})
        assert [e async for e in second.follow("chat-2")] == []  # its run is over
    assert any(isinstance(e, ToolCall) and e.name == "mrtr.provision" for e in followed)
    assert any(isinstance(e, Text) and "us-east-1" in e.text for e in followed)


async def test_an_unknown_token_is_unauthorized(hub: RunningHub) -> None:
    async with HubClient(hub.url, token="not-a-token") as client:
        with pytest.raises(Unauthorized):
            [e async for e in client.chat("hello")]


async def test_a_hub_that_is_not_there_is_unreachable() -> None:
    async with HubClient(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(HubUnreachable, match="cannot reach the hub"):
            [e async for e in client.chat("hello")]
