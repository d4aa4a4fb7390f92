"""The round driver, the recognition rule and the tool router on plain values; an MCP trigger against a real server."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import mcp_types as mt
import pytest
from pydantic import TypeAdapter

from elicithub.config import McpServerConfig
from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer
from elicithub.core.events import ElicitationRequested, RunPaused
from elicithub.protocol.mcp_rounds import EmptyRound, RoundsExceeded, drive_rounds, is_full_round, is_input_required
from elicithub.runtime.asker import Asker
from elicithub.runtime.models import ToolSpec
from elicithub.runtime.router import ToolRouter
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.store import MemoryElicitations
from elicithub.triggers.mcp import McpShared, downstream_client, mcp_triggers
from tests.conftest import McpProcess

pytestmark = pytest.mark.anyio


def round_(state: str | None, **requests: str) -> mt.InputRequiredResult:
    asks = {
        key: mt.ElicitRequest(params=mt.ElicitRequestFormParams(message=m, requested_schema={"type": "object"}))
        for key, m in requests.items()
    }
    return mt.InputRequiredResult(input_requests=asks or None, request_state=state)


def done(text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)])


async def test_each_round_is_answered_by_key_and_its_state_echoed() -> None:
    rounds = [round_("s1", region="Which region?", size="How big?"), round_("s2", confirm="Sure?"), done("ok")]
    asked: list[tuple[list[str], int]] = []
    retried: list[tuple[Any, str | None]] = []

    async def fulfil(r: mt.InputRequiredResult, n: int) -> mt.InputResponses:
        asked.append((sorted(r.input_requests or {}), n))
        return {k: mt.ElicitResult(action="accept", content={"v": k}) for k in r.input_requests or {}}

    async def retry(responses: mt.InputResponses | None, state: str | None) -> Any:
        retried.append((sorted(responses or {}), state))
        return rounds[len(retried)]

    result = await drive_rounds(rounds[0], fulfil=fulfil, retry=retry, max_rounds=5)
    assert result == done("ok")
    assert asked == [(["region", "size"], 1), (["confirm"], 2)]
    assert retried == [(["region", "size"], "s1"), (["confirm"], "s2")]


async def test_a_state_only_round_is_retried_without_asking() -> None:
    results = [round_("wait"), round_("wait"), done("ready")]
    calls: list[Any] = []

    async def fulfil(r: mt.InputRequiredResult, n: int) -> mt.InputResponses:
        raise AssertionError("nothing to ask")

    async def retry(responses: mt.InputResponses | None, state: str | None) -> Any:
        calls.append((responses, state))
        return results[len(calls)]

    assert await drive_rounds(results[0], fulfil=fulfil, retry=retry, max_rounds=5) == done("ready")
    assert calls == [(None, "wait"), (None, "wait")]


async def test_a_server_that_keeps_asking_is_stopped_at_the_cap() -> None:
    async def fulfil(r: mt.InputRequiredResult, n: int) -> mt.InputResponses:
        return {}

    async def retry(responses: mt.InputResponses | None, state: str | None) -> Any:
        return round_("again", q="Again?")

    with pytest.raises(RoundsExceeded):
        await drive_rounds(round_("s", q="?"), fulfil=fulfil, retry=retry, max_rounds=3)


async def test_a_round_with_nothing_to_ask_and_empty_state_is_not_retried() -> None:
    async def fulfil(r: mt.InputRequiredResult, n: int) -> mt.InputResponses:
        raise AssertionError("nothing to ask")

    async def retry(responses: mt.InputResponses | None, state: str | None) -> Any:
        raise AssertionError("not a round")

    empty = TypeAdapter(mt.CallToolResult | mt.InputRequiredResult).validate_python({"requestState": ""})
    with pytest.raises(EmptyRound):
        await drive_rounds(empty, fulfil=fulfil, retry=retry, max_rounds=5)


@pytest.mark.parametrize(
    "data",
    [
        {"content": [{"type": "text", "text": "hi"}], "inputRequests": {}},
        {"content": [{"type": "text", "text": "hi"}], "requestState": ""},
    ],
)
async def test_a_half_shaped_response_is_an_ordinary_result(data: dict[str, Any]) -> None:
    async def fulfil(r: mt.InputRequiredResult, n: int) -> mt.InputResponses:
        raise AssertionError("nothing to ask")

    async def retry(responses: mt.InputResponses | None, state: str | None) -> Any:
        raise AssertionError("nothing to retry")

    parsed = TypeAdapter(mt.CallToolResult | mt.InputRequiredResult).validate_python(data)
    assert await drive_rounds(parsed, fulfil=fulfil, retry=retry, max_rounds=5) == done("hi")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"inputRequests": {"a": {}}, "requestState": "s"}, True),
        ({"requestState": "s"}, True),
        ({"inputRequests": {"a": {}}}, True),
        ({"inputRequests": {}, "requestState": ""}, False),
        ({"inputRequests": [], "requestState": 3}, False),
        ({"content": [{"type": "text", "text": "hi"}]}, False),
    ],
)
def test_what_counts_as_input_required(data: dict[str, Any], expected: bool) -> None:
    assert is_input_required(data) is expected


class Fixed:
    def __init__(self, prefix: str, fail: bool = False) -> None:
        self.prefix = prefix
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self, context: CallContext | None) -> list[ToolSpec]:
        if self.fail:
            raise ConnectionError("down")
        return [ToolSpec("do", "Does it.", {"type": "object"})]

    async def call(self, tool: str, arguments: dict[str, Any], context: CallContext) -> ToolOutcome:
        self.calls.append((tool, arguments))
        return ToolOutcome(f"{self.prefix} did {tool}")

    async def close(self) -> None:
        return None


async def test_the_router_dispatches_by_prefix_and_skips_a_trigger_that_cannot_list() -> None:
    a, b, down = Fixed("a"), Fixed("b"), Fixed("down", fail=True)
    router = ToolRouter([a, b, down])
    assert [t.name for t in await router.list_tools()] == ["a.do", "b.do"]
    context = CallContext("c", "run_1", "alice", True)
    assert await router.call("b.do", {"x": 1}, context) == ToolOutcome("b did do")
    assert b.calls == [("do", {"x": 1})] and a.calls == []
    assert (await router.call("nope.do", {}, context)).is_error
    assert (await router.call("a", {}, context)).is_error
    with pytest.raises(ValueError, match="two triggers"):
        router.register(Fixed("a"))


class Recorded:
    def __init__(self) -> None:
        self.events: list[Any] = []

    async def publish(self, elicitation: Any, event: Any) -> None:
        self.events.append(event)


async def test_an_mcp_trigger_asks_through_the_asker_and_gets_the_answer(mrtr_server: McpProcess) -> None:
    sink = Recorded()
    broker = Broker(MemoryElicitations(), sink)
    await broker.start()
    http = downstream_client(60)
    emitted: list[Any] = []
    paused_now = asyncio.Event()

    async def emit(event: Any) -> None:
        emitted.append(event)
        paused_now.set()

    [trigger] = mcp_triggers([McpServerConfig(id="mrtr", url=mrtr_server.url)], McpShared(broker, http, 60, 5))
    context = CallContext("conv", "run_1", "alice", True, Asker(broker, emit=emit))
    try:
        call = asyncio.create_task(trigger.call("provision", {"name": "orders"}, context))
        with anyio.fail_after(10):
            await paused_now.wait()
        [paused] = emitted
        assert isinstance(paused, RunPaused)
        asked = next(e for e in sink.events if isinstance(e, ElicitationRequested))
        assert asked.elicitation.context["trigger"] == "mcp_elicitation"
        await broker.respond(paused.elicitation_ids[0], Answer("accept", {"region": "eu-west-1"}), "alice")
        with anyio.fail_after(10):
            outcome = await call
        assert outcome == ToolOutcome("Provisioned orders in eu-west-1.")
    finally:
        await http.aclose()
        await broker.close()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"inputRequests": {"a": {}}, "requestState": "s"}, True),
        ({"requestState": "s"}, False),  # state only: the hub retries it; the test runner holds it half-shaped
        ({"inputRequests": {"a": {}}}, False),
        ({"inputRequests": {"a": {}}, "requestState": ""}, False),
        ({"inputRequests": {}, "requestState": "s"}, False),
    ],
)
def test_what_the_test_runner_counts_as_a_round(data: dict[str, Any], expected: bool) -> None:
    assert is_full_round(data) is expected
