"""Downstream MCP tasks: the trigger follows a task to its end, asks its rounds through the asker, answers in the
server's shape, cancels it when the person does, and after an interruption goes on with the same task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from elicithub.config import McpServerConfig
from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, Elicitation
from elicithub.core.events import ElicitationRequested, RunPaused
from elicithub.core.runs import Pause
from elicithub.runtime.asker import Asker
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.store import MemoryElicitations
from elicithub.triggers.mcp import McpShared, downstream_client
from elicithub.triggers.mcp.pauses import TaskState
from elicithub.triggers.mcp.server import McpServerTrigger
from tests.conftest import ServedInThread, served
from tests.servers.core_tasks_server import build as build_core
from tests.servers.tasks_server import TaskBook, build
from tests.shapes import assert_shaped

pytestmark = pytest.mark.anyio


@dataclass
class TaskServer:
    served: ServedInThread
    book: TaskBook

    @property
    def url(self) -> str:
        return f"{self.served.url}/mcp"


def _serve(shape: str) -> Iterator[TaskServer]:
    server, book = build(shape)
    with served(server.streamable_http_app()) as running:
        yield TaskServer(running, book)


@pytest.fixture
def tasks_server() -> Iterator[TaskServer]:
    yield from _serve("2026-07-28")


@pytest.fixture
def draft_server() -> Iterator[TaskServer]:
    yield from _serve("draft")


@dataclass
class Call:
    """A tool call's questions as the person sees them, and the pauses its run records."""

    broker: Broker = field(init=False)
    asked: asyncio.Queue[Elicitation] = field(default_factory=asyncio.Queue)
    pauses: list[Pause] = field(default_factory=list)

    async def publish(self, elicitation: Any, event: Any) -> None:
        if isinstance(event, ElicitationRequested):
            self.asked.put_nowait(event.elicitation)

    async def save(self, pause: Pause) -> None:
        self.pauses.append(pause)

    said: list[str] = field(default_factory=list)

    def context(self, resume: Pause | None = None) -> CallContext:
        async def emit(event: Any) -> None:
            assert isinstance(event, RunPaused)

        async def progress(text: str) -> None:
            self.said.append(text)

        asker = Asker(self.broker, save=self.save, emit=emit, resume=resume)
        return CallContext("conv", "run_1", "alice", True, asker, progress=progress)

    async def question(self) -> Elicitation:
        with anyio.fail_after(20):
            return await self.asked.get()

    async def answer(self, action: str = "accept", content: dict[str, Any] | None = None) -> Elicitation:
        asked = await self.question()
        await self.broker.respond(asked.id, Answer(action, content), "alice")  # type: ignore[arg-type]
        return asked


@pytest.fixture
async def call() -> AsyncIterator[Call]:
    recorded = Call()
    # Durable: a call interrupted (as by a restart) leaves its question open for the resumed call.
    recorded.broker = broker = Broker(MemoryElicitations(), recorded, durable=True)
    await broker.start()
    yield recorded
    await broker.close()


@pytest.fixture
async def http() -> AsyncIterator[Any]:
    client = downstream_client(60)
    yield client
    await client.aclose()


def trigger(server: TaskServer, call: Call, http: Any, **config: Any) -> McpServerTrigger:
    return McpServerTrigger(McpServerConfig(id="wh", url=server.url, **config), McpShared(call.broker, http, 60, 5))


async def finish(running: asyncio.Task[ToolOutcome]) -> ToolOutcome:
    with anyio.fail_after(20):
        return await running


async def test_a_task_that_asks_once_is_answered_and_completes(tasks_server: TaskServer, call: Call, http: Any) -> None:
    running = asyncio.create_task(trigger(tasks_server, call, http).call("migrate", {"name": "orders"}, call.context()))
    asked = await call.answer("accept", {"confirm": True})
    assert asked.message == "Migrate orders now?"
    assert asked.context == {"trigger": "mcp_elicitation", "serverId": "wh", "toolName": "migrate", "taskId": "task-1"}
    assert await finish(running) == ToolOutcome("migrate orders done (confirm={'confirm': True}).")
    assert tasks_server.book.calls["migrate"] == 1
    assert call.pauses[0].state["kind"] == "task"  # the task id is on the run before anything is asked


async def test_a_task_that_asks_twice_is_answered_round_by_round(
    tasks_server: TaskServer, call: Call, http: Any
) -> None:
    running = asyncio.create_task(trigger(tasks_server, call, http).call("deploy", {"name": "api"}, call.context()))
    assert (await call.answer("accept", {"region": "eu-west-1"})).message == "Which region?"
    assert (await call.answer("accept", {"confirm": True})).message == "Deploy api?"
    outcome = await finish(running)
    assert outcome == ToolOutcome("deploy api done (confirm={'confirm': True}, region={'region': 'eu-west-1'}).")
    assert call.asked.empty()  # a round already answered is never asked again while the server catches up


async def test_every_pause_a_task_records_has_the_keys_of_its_shape(
    tasks_server: TaskServer, core_server: TaskServer, call: Call, http: Any
) -> None:
    running = asyncio.create_task(trigger(tasks_server, call, http).call("deploy", {"name": "api"}, call.context()))
    await call.answer("accept", {"region": "eu-west-1"})
    await call.answer("accept", {"confirm": True})
    await finish(running)
    legacy = trigger(core_server, call, http, protocol="legacy")
    running = asyncio.create_task(legacy.call("migrate", {"name": "orders"}, call.context()))
    await call.answer("accept", {"confirm": True})
    await finish(running)
    assert {p.state["shape"] for p in call.pauses} == {"2026-07-28", "2025-11-25"}
    for pause in call.pauses:
        assert_shaped(pause.state, TaskState)


async def test_a_task_asks_for_a_sign_in_by_link(tasks_server: TaskServer, call: Call, http: Any) -> None:
    running = asyncio.create_task(trigger(tasks_server, call, http).call("connect", {}, call.context()))
    asked = await call.answer("accept")
    assert (asked.mode, asked.url) == ("url", "https://warehouse.example/login")
    assert not (await finish(running)).is_error


async def test_each_status_message_of_a_working_task_is_shown_once(
    tasks_server: TaskServer, call: Call, http: Any
) -> None:
    outcome = await trigger(tasks_server, call, http).call("copy", {"name": "orders"}, call.context())
    assert outcome == ToolOutcome("copy orders done ().")
    assert call.said == ["Copying orders", "Indexing orders"]


async def test_a_failed_task_is_a_tool_error_naming_why(tasks_server: TaskServer, call: Call, http: Any) -> None:
    outcome = await trigger(tasks_server, call, http).call("explode", {}, call.context())
    assert outcome == ToolOutcome("Tool wh.explode failed: the disk is full", is_error=True)


async def test_a_task_its_server_cancels_is_a_tool_error(tasks_server: TaskServer, call: Call, http: Any) -> None:
    outcome = await trigger(tasks_server, call, http).call("abandon", {}, call.context())
    assert outcome == ToolOutcome("Tool wh.abandon was cancelled by its server: the operator stopped it", is_error=True)


async def test_the_person_cancelling_cancels_the_task(tasks_server: TaskServer, call: Call, http: Any) -> None:
    running = asyncio.create_task(trigger(tasks_server, call, http).call("migrate", {}, call.context()))
    await call.answer("cancel")
    outcome = await finish(running)
    assert outcome.is_error and "was cancelled" in outcome.text
    assert tasks_server.book.cancelled == ["task-1"]


async def test_a_decline_reaches_the_server_as_a_declined_answer(
    tasks_server: TaskServer, call: Call, http: Any
) -> None:
    running = asyncio.create_task(trigger(tasks_server, call, http).call("migrate", {}, call.context()))
    await call.answer("decline")
    assert await finish(running) == ToolOutcome("migrate db stopped: the user chose decline.", is_error=True)
    assert tasks_server.book.cancelled == []


async def test_a_task_its_server_forgot_is_a_clear_error(tasks_server: TaskServer, call: Call, http: Any) -> None:
    outcome = await trigger(tasks_server, call, http).call("forget", {}, call.context())
    assert outcome.is_error and "no longer knows task task-1" in outcome.text


async def test_an_interrupted_call_goes_on_with_the_same_task(tasks_server: TaskServer, call: Call, http: Any) -> None:
    wh = trigger(tasks_server, call, http)
    first = asyncio.create_task(wh.call("deploy", {"name": "api"}, call.context()))
    asked = await call.question()
    first.cancel()  # the hub stops (a restart): the question and the pause stay in the store
    with pytest.raises(asyncio.CancelledError):
        await first
    resume = call.pauses[-1]
    assert (resume.state["task_id"], list(resume.elicitation_ids)) == ("task-1", ["region"])
    await call.broker.respond(asked.id, Answer("accept", {"region": "us-east-1"}), "alice")
    again = asyncio.create_task(wh.call("deploy", {"name": "api"}, call.context(resume)))
    await call.answer("accept", {"confirm": True})
    outcome = await finish(again)
    assert outcome == ToolOutcome("deploy api done (confirm={'confirm': True}, region={'region': 'us-east-1'}).")
    assert tasks_server.book.calls["deploy"] == 1


async def test_the_earlier_draft_is_answered_by_input_response(draft_server: TaskServer, call: Call, http: Any) -> None:
    running = asyncio.create_task(trigger(draft_server, call, http).call("migrate", {"name": "x"}, call.context()))
    await call.answer("accept", {"confirm": True})
    assert await finish(running) == ToolOutcome("migrate x done (confirm={'confirm': True}).")


async def test_tasks_off_does_not_offer_them(tasks_server: TaskServer, call: Call, http: Any) -> None:
    outcome = await trigger(tasks_server, call, http, tasks="off").call("migrate", {}, call.context())
    assert outcome.is_error and "Missing required client capability" in outcome.text
    assert tasks_server.book.tasks == {}


@pytest.fixture
def core_server() -> Iterator[TaskServer]:
    server, book = build_core()
    with served(server.streamable_http_app()) as running:
        yield TaskServer(running, book)


async def test_a_2025_11_25_task_asks_on_its_result_stream(core_server: TaskServer, call: Call, http: Any) -> None:
    wh = trigger(core_server, call, http, protocol="legacy")
    running = asyncio.create_task(wh.call("migrate", {"name": "orders"}, call.context()))
    asked = await call.answer("accept", {"confirm": True})
    assert asked.context["taskId"] == "task-1"
    assert await finish(running) == ToolOutcome("migrate orders done ({'confirm': True}).")
    assert core_server.book.calls["migrate"] == 1


async def test_a_2025_11_25_task_the_person_cancels_is_cancelled(
    core_server: TaskServer, call: Call, http: Any
) -> None:
    wh = trigger(core_server, call, http, protocol="legacy")
    running = asyncio.create_task(wh.call("migrate", {}, call.context()))
    await call.answer("cancel")
    assert (await finish(running)).is_error
    assert core_server.book.cancelled == ["task-1"]


async def test_a_failed_2025_11_25_task_is_a_tool_error(core_server: TaskServer, call: Call, http: Any) -> None:
    outcome = await trigger(core_server, call, http, protocol="legacy").call("explode", {}, call.context())
    assert outcome == ToolOutcome("Tool wh.explode did not finish: the disk is full", is_error=True)
