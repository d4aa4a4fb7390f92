"""The model's text streams to an A2A client that reads the task as a stream: artifact updates of the `answer`
artifact that append as the model writes, then the answer whole (`lastChunk`); a blocking `SendMessage` gets the
task with the answer, as before. The model is OpenAI's (pydantic-ai and its SDK) on the stand-in of its API."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.client import Client
from a2a.helpers import get_artifact_text, get_message_text
from a2a.types import (
    GetTaskRequest,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskArtifactUpdateEvent,
    TaskState,
)

from elicithub.surfaces.a2a import answer as a2a_answer
from tests.conftest import HubFactory, RunningHub
from tests.core_fixtures import DEADLINE_S
from tests.models.script import Fail, Gate, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn
from tests.surfaces.a2a.test_agent import a2a_client, answer, label, message

KEY_ENV = "ELICITHUB_TEST_MODEL_KEY"
WORDS = [f"word{i} " for i in range(40)]
INPUT = TaskState.TASK_STATE_INPUT_REQUIRED


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelStandIn]:
    monkeypatch.setenv(KEY_ENV, "sk-standin")
    with ModelStandIn() as standin:
        yield standin


def on_model(make_hub: HubFactory, model: ModelStandIn) -> RunningHub:
    """A hub (sharing the test's store) whose agent runs on OpenAI's model, the stand-in."""
    entry = {
        "id": "gpt",
        "provider": "openai",
        "model": "standin-1",
        "base_url": model.openai_base_url,
        "api_key_env": KEY_ENV,
    }
    return make_hub(models=[entry], model="gpt")


def artifacts(events: list[StreamResponse]) -> list[TaskArtifactUpdateEvent]:
    return [e.artifact_update for e in events if e.WhichOneof("payload") == "artifact_update"]


def text_of(update: TaskArtifactUpdateEvent) -> str:
    return "".join(part.text for part in update.artifact.parts)


def folded(updates: list[TaskArtifactUpdateEvent]) -> str:
    """The answer as a client that follows A2A's rule holds it: `append` adds to it, anything else replaces it."""
    held = ""
    for update in updates:
        held = held + text_of(update) if update.append else text_of(update)
    return held


async def streamed(client: Client, request: SendMessageRequest, first_chunk: Gate | None = None) -> list[Any]:
    """Every event of a streaming send; `first_chunk` is released once the first artifact chunk has come (so it
    must come while the model's stream is held there)."""
    events: list[StreamResponse] = []
    async with asyncio.timeout(DEADLINE_S):
        async for event in client.send_message(request):
            events.append(event)
            if first_chunk is not None and artifacts(events) and not first_chunk.released.is_set():
                assert first_chunk.reached.is_set()
                first_chunk.release()
    return events


def test_the_answer_streams_as_chunks_that_append_then_whole(
    make_hub: HubFactory, model: ModelStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(a2a_answer, "CHUNK_INTERVAL_S", 3600)  # no chunk is due on time: the end sends the rest
    hub = on_model(make_hub, model)
    gate = Gate()
    model.reply(Thinking("Let me count."), Text("Here they are: "), gate, *map(Text, WORDS))
    whole = "Here they are: " + "".join(WORDS)

    async def go() -> tuple[list[StreamResponse], Any]:
        async with a2a_client(hub, streaming=True) as client:
            events = await streamed(client, SendMessageRequest(message=message("count for me")), gate)
            task = await client.get_task(GetTaskRequest(id=events[0].task.id))
            return events, task

    events, task = asyncio.run(go())
    updates = artifacts(events)
    first, rest, last = updates  # forty deltas released at once: one chunk, not one per delta
    assert text_of(first) == "Here they are: " and not first.append and not first.last_chunk
    assert rest.append and not rest.last_chunk
    assert text_of(first) + text_of(rest) == whole  # the chunks, in order, are the text
    assert text_of(last) == whole and last.last_chunk and not last.append  # then the answer whole
    assert {u.artifact.artifact_id for u in updates} == {"answer"}
    assert folded(updates) == whole
    assert [label(e) for e in events][-1] == "TASK_STATE_COMPLETED"
    [kept] = task.artifacts
    assert len(kept.parts) == 1 and kept.parts[0].text == whole  # stored whole, as a blocking send has it


def test_a_question_mid_run_still_makes_the_task_input_required(make_hub: HubFactory, model: ModelStandIn) -> None:
    hub = on_model(make_hub, model)
    model.reply(Text("Let me "), Text("provision it."), ToolCall("mrtr__provision", {"name": "orders"}))
    gate = Gate()
    model.reply(Text("Provisioned "), gate, Text("orders "), Text("in eu-west-1."))

    async def go() -> tuple[list[StreamResponse], list[StreamResponse], Any]:
        async with a2a_client(hub, streaming=True) as client:
            asking = await streamed(client, SendMessageRequest(message=message("provision orders")))
            task = await client.get_task(GetTaskRequest(id=asking[0].task.id))
            assert task.status.state == INPUT
            done = await streamed(
                client, SendMessageRequest(message=answer(task, content={"region": "eu-west-1"})), gate
            )
            return asking, done, await client.get_task(GetTaskRequest(id=task.id))

    asking, done, task = asyncio.run(go())
    labels = [label(e) for e in asking]
    assert labels[-1] == "TASK_STATE_INPUT_REQUIRED"
    assert folded(artifacts(asking)) == "Let me provision it."  # what the model said before it called, streamed
    updates = artifacts(done)
    assert not updates[0].append and text_of(updates[0]) == "Provisioned "  # the last words start the answer again
    assert folded(updates) == "Provisioned orders in eu-west-1." and updates[-1].last_chunk
    assert [label(e) for e in done][-1] == "TASK_STATE_COMPLETED"
    assert [get_artifact_text(a) for a in task.artifacts] == ["Provisioned orders in eu-west-1."]


def test_a_blocking_send_gets_the_task_with_the_answer_whole(make_hub: HubFactory, model: ModelStandIn) -> None:
    hub = on_model(make_hub, model)
    model.reply(*map(Text, WORDS))

    async def go() -> Any:
        async with a2a_client(hub) as client:
            [response] = [e async for e in client.send_message(SendMessageRequest(message=message("count")))]
            return response.task

    task = asyncio.run(go())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [kept] = task.artifacts
    assert [p.text for p in kept.parts] == ["".join(WORDS)]


def test_a_subscriber_on_another_hub_ends_with_the_answer_whole(make_hub: HubFactory, model: ModelStandIn) -> None:
    """It reads the task from the store: chunks saved since it last read come as the artifact whole, again."""
    here, there = on_model(make_hub, model), on_model(make_hub, model)
    gate = Gate()
    model.reply(Text("Here "), gate, *map(Text, WORDS))
    whole = "Here " + "".join(WORDS)

    async def go() -> list[StreamResponse]:
        async with a2a_client(here, streaming=True) as running, a2a_client(there, streaming=True) as other:
            events = running.send_message(SendMessageRequest(message=message("count")))
            async with asyncio.timeout(DEADLINE_S):
                async for event in events:
                    if event.WhichOneof("payload") == "artifact_update":
                        break  # the first chunk is saved with the task
                subscribed = other.subscribe(SubscribeToTaskRequest(id=event.artifact_update.task_id))
                seen = [await anext(subscribed)]  # the snapshot, with the first chunk
                gate.release()
                seen += [e async for e in subscribed]
                await events.aclose()
            return seen

    seen = asyncio.run(go())
    assert seen[0].task.artifacts[0].parts[0].text == "Here "
    assert folded(artifacts(seen)) == whole
    assert [label(e) for e in seen][-1] == "TASK_STATE_COMPLETED"


def test_a_retried_model_request_is_the_working_tasks_status(make_hub: HubFactory, model: ModelStandIn) -> None:
    hub = on_model(make_hub, model)
    model.reply(Fail(429, "Slow down.", retry_after=0))
    model.reply(Text("Done."))

    async def go() -> list[StreamResponse]:
        async with a2a_client(hub, streaming=True) as client:
            return await streamed(client, SendMessageRequest(message=message("go")))

    events = asyncio.run(go())
    statuses = [e.status_update.status for e in events if e.WhichOneof("payload") == "status_update"]
    said = [get_message_text(s.message) for s in statuses if s.state == TaskState.TASK_STATE_WORKING]
    assert "Model gpt is busy; retrying now." in said
    assert folded(artifacts(events)) == "Done." and statuses[-1].state == TaskState.TASK_STATE_COMPLETED
