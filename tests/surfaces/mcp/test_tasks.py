"""The hub's /mcp serving its agents' calls as MCP tasks: a 2026-07-28 client declaring the tasks extension, and a
2025-11-25 client sending `task` (the SDK has no tasks runtime: the tasks/* requests go as plain requests)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.shared.exceptions import MCPError

from elicithub.core.elicitation import State
from elicithub.core.events import RunFinished, ToolCallFinished
from elicithub.protocol.mcp_task_requests import (
    Anything,
    CancelTask,
    GetTask,
    TaskResult,
    TasksClientExtension,
    UpdateTask,
)
from elicithub.protocol.mcp_tasks import RELATED_TASK, TERMINAL, TaskHandle, TaskParams, UpdateParams
from elicithub.surfaces.mcp import tasks as surface_tasks
from elicithub.triggers.mcp.tasks import start_core_task
from tests.auth.test_mcp_surface_sign_in import rpc
from tests.conftest import HubFactory, RunningHub, eventually
from tests.servers.mrtr_server import REGION
from tests.surfaces.mcp.test_server import PROVISION, connected, token

MODERN = "2026-07-28"
EU = {"action": "accept", "content": {"region": "eu-west-1"}}


def tasks_client(hub: RunningHub, user: str = "alice", **kw: Any) -> Any:
    return connected(hub, MODERN, user=user, extensions=[TasksClientExtension()], **kw)


async def start(client: Client, message: str = PROVISION) -> TaskHandle:
    handle = await client.session.call_tool(
        "assistant", {"message": message}, allow_input_required=True, allow_claimed=True
    )
    assert isinstance(handle, TaskHandle), handle
    return handle


async def get(client: Client, task_id: str) -> dict[str, Any]:
    return (await client.session.send_request(GetTask(params=TaskParams(task_id=task_id)), Anything)).data()


async def update(client: Client, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    params = UpdateParams.model_validate({"taskId": task_id, "inputResponses": responses})
    return (await client.session.send_request(UpdateTask(params=params), Anything)).data()


async def cancel(client: Client, task_id: str) -> dict[str, Any]:
    return (await client.session.send_request(CancelTask(params=TaskParams(task_id=task_id)), Anything)).data()


def ack(result: dict[str, Any]) -> bool:
    """An empty 2026-07-28 result: `resultType` (and the server's `_meta` stamp) only."""
    return result.get("resultType") == "complete" and set(result) <= {"resultType", "_meta"}


async def until_ended(client: Client, task_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (task := await get(client, task_id))["status"] not in TERMINAL:
        assert time.monotonic() < deadline, task
        await asyncio.sleep(0.05)
    return task


def pending(hub: RunningHub) -> int:
    with hub.client() as chat:
        return int(chat.get("/healthz").json()["pendingElicitations"])


def test_a_2026_client_gets_a_task_answers_it_and_reads_the_result(hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(hub) as (client, asked):
            handle = await start(client)
            assert handle.status == "input_required" and handle.ttl_ms and handle.poll_interval_ms
            task = await get(client, handle.task_id)
            assert task["status"] == "input_required" and task["resultType"] == "complete"
            [(key, request)] = task["inputRequests"].items()
            assert key.startswith("eli_") and request["method"] == "elicitation/create"
            assert request["params"]["requestedSchema"] == REGION
            with pytest.raises(MCPError, match="region") as refused:  # the field is named; nothing changes
                await update(client, handle.task_id, {key: {"action": "accept", "content": {"region": "mars"}}})
            assert refused.value.error.code == mt.INVALID_PARAMS
            assert list((await get(client, handle.task_id))["inputRequests"]) == [key]
            assert ack(await update(client, handle.task_id, {key: EU}))
            assert ack(await update(client, handle.task_id, {key: EU}))  # harmless
            done = await until_ended(client, handle.task_id)
            assert done["status"] == "completed"
            assert done["result"]["content"][0]["text"] == "Provisioned orders in eu-west-1."
            assert not done["result"]["isError"] and done["result"]["structuredContent"]["conversationId"]
            assert asked == []  # nothing was asked on the side: the task carried the question

    asyncio.run(go())
    assert pending(hub) == 0


def test_a_call_that_asks_nothing_is_answered_at_once_not_as_a_task(hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(hub) as (client, _):
            result = await client.session.call_tool(
                "assistant", {"message": "hello"}, allow_input_required=True, allow_claimed=True
            )
        assert isinstance(result, mt.CallToolResult) and not result.is_error

    asyncio.run(go())


def test_another_users_task_id_is_unknown_and_changes_nothing(hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(hub) as (alice, _), tasks_client(hub, user="bob") as (bob, _):
            handle = await start(alice)
            [key] = (await get(alice, handle.task_id))["inputRequests"]
            for attempt in (
                get(bob, handle.task_id),
                update(bob, handle.task_id, {key: EU}),
                cancel(bob, handle.task_id),
            ):
                with pytest.raises(MCPError) as refused:
                    await attempt
                assert refused.value.error.code == mt.INVALID_PARAMS
            assert (await get(alice, handle.task_id))["status"] == "input_required"
            await cancel(alice, handle.task_id)

    asyncio.run(go())


def test_a_cancelled_task_ends_its_questions_and_reads_cancelled(hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(hub) as (client, _):
            handle = await start(client, '/call mrtr.provision {"name": "never"}')
            assert pending(hub) == 1
            assert ack(await cancel(client, handle.task_id))
            assert (await get(client, handle.task_id))["status"] == "cancelled"
            assert ack(await cancel(client, handle.task_id))  # again: still an ack

    asyncio.run(go())
    assert pending(hub) == 0
    eventually(lambda: not hub.hub.conversations.running(), "the cancelled task's run kept running")
    url = hub.config.mcp_servers[1].url
    assert url is not None
    assert httpx.get(url.removesuffix("/mcp") + "/debug/provisioned").json().get("never", 0) == 0


def test_a_cancelled_task_stops_its_run_without_calling_the_downstream_tool_again(hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(hub) as (client, _):
            handle = await start(client, '/call mrtr.provision {"name": "task-stopped"}')
            [key] = (await get(client, handle.task_id))["inputRequests"]
            assert ack(await cancel(client, handle.task_id))
            asked, events = await asyncio.to_thread(hub.run_ended, key)
            assert hub.downstream_calls("provision", "task-stopped") == 1  # the round that asked; no retry
            assert asked.outcome == "cancelled"
            [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
            assert finished.is_error and "stopped" in finished.text
            assert RunFinished("superseded") in events
            assert (await get(client, handle.task_id))["status"] == "cancelled"

    asyncio.run(go())


def test_a_question_the_person_cancels_is_an_answer_the_downstream_tool_gets(hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(hub) as (client, _):
            handle = await start(client, '/call mrtr.provision {"name": "person-cancelled"}')
            [key] = (await get(client, handle.task_id))["inputRequests"]
            assert ack(await update(client, handle.task_id, {key: {"action": "cancel"}}))
            done = await until_ended(client, handle.task_id)
            assert done["status"] == "completed"  # the run went on: only the question was cancelled
            assert "the user chose cancel" in done["result"]["content"][0]["text"]

    asyncio.run(go())
    assert hub.downstream_calls("provision", "person-cancelled") == 2  # the round, and its retry with the cancel


def test_a_client_that_did_not_declare_the_extension_gets_no_task(hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(hub) as (client, _):
            handle = await start(client)
        async with connected(hub, MODERN) as (plain, _):
            with pytest.raises(MCPError) as refused:
                await get(plain, handle.task_id)
            assert refused.value.error.code == mt.MISSING_REQUIRED_CLIENT_CAPABILITY
            first = await plain.session.call_tool("assistant", {"message": PROVISION}, allow_input_required=True)
            assert isinstance(first, mt.InputRequiredResult)  # a round, as before
        async with tasks_client(hub) as (client, _):
            await cancel(client, handle.task_id)

    asyncio.run(go())


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_any_instance_sharing_the_store_answers_a_task(make_hub: HubFactory, request: Any, store: str) -> None:
    overrides = {} if store == "sqlite" else {"store": {"url": request.getfixturevalue("redis_url")}}
    first, second = make_hub(**overrides), make_hub(**overrides)

    async def go() -> None:
        async with tasks_client(first) as (one, _), tasks_client(second) as (two, _):
            handle = await start(one)
            task = await get(two, handle.task_id)
            assert task["status"] == "input_required"
            [key] = task["inputRequests"]
            await update(two, handle.task_id, {key: EU})
            done = await until_ended(two, handle.task_id)
            assert done["result"]["content"][0]["text"] == "Provisioned orders in eu-west-1."
            assert (await get(one, handle.task_id))["status"] == "completed"

    asyncio.run(go())


# -- 2025-11-25


def test_a_2025_server_declares_tasks_and_its_tools_take_them(hub: RunningHub) -> None:
    with httpx.Client(base_url=hub.url, headers={"authorization": f"Bearer {token('alice')}"}, timeout=30) as client:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        session, reply = rpc(client, None, "initialize", init, 1)
        assert reply["result"]["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
        rpc(client, session, "notifications/initialized", {}, None)
        _, reply = rpc(client, session, "tools/list", {}, 2)
    assert reply["result"]["tools"][0]["execution"] == {"taskSupport": "optional"}


def test_a_2025_client_calls_as_a_task_and_is_asked_on_the_result_stream(hub: RunningHub) -> None:
    asked: list[mt.ElicitRequestParams] = []

    async def on_elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params)
        return mt.ElicitResult(action="accept", content={"region": "us-east-1"})

    async def go() -> None:
        async with connected(hub, "legacy", elicitation_callback=on_elicit) as (client, _):
            handle = await start_core_task(client.session, "assistant", {"message": PROVISION})
            assert handle.status == "working"
            assert (await get(client, handle.task_id))["status"] in ("working", "input_required")
            params = TaskParams(task_id=handle.task_id)
            result = (await client.session.send_request(TaskResult(params=params), Anything)).data()
            assert result["content"][0]["text"] == "Provisioned orders in us-east-1."
            assert result["_meta"][RELATED_TASK] == {"taskId": handle.task_id}
            assert (await get(client, handle.task_id))["status"] == "completed"
            listed = (await client.session.send_request(mt.ListTasksRequest(), Anything)).data()
            assert [t["taskId"] for t in listed["tasks"]] == [handle.task_id]
        async with connected(hub, "legacy", user="bob") as (bob, _):
            listed = (await bob.session.send_request(mt.ListTasksRequest(), Anything)).data()
            assert listed["tasks"] == []  # its own tasks only
            with pytest.raises(MCPError) as refused:
                await get(bob, handle.task_id)
            assert refused.value.error.code == mt.INVALID_PARAMS
        assert len(asked) == 1 and (asked[0].meta or {})[RELATED_TASK] == {"taskId": handle.task_id}

    asyncio.run(go())


def test_a_cancelled_2025_task_ends_and_its_result_is_an_error(hub: RunningHub) -> None:
    async def go() -> None:
        async with connected(hub, "legacy") as (client, _):
            handle = await start_core_task(client.session, "assistant", {"message": PROVISION})
            deadline = time.monotonic() + 30
            while (await get(client, handle.task_id))["status"] != "input_required":  # the run asks
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            cancelled = await cancel(client, handle.task_id)
            assert cancelled["status"] == "cancelled"
            with pytest.raises(MCPError, match="cancelled"):
                await client.session.send_request(TaskResult(params=TaskParams(task_id=handle.task_id)), Anything)

    asyncio.run(go())
    assert pending(hub) == 0


def store_url(request: Any, store: str) -> dict[str, Any]:
    """The hub's `store` setting for each backend the suite has (SQLite: the hub's default)."""
    if store == "sqlite":
        return {}
    return {"store": {"url": "memory://" if store == "memory" else request.getfixturevalue(f"{store}_url")}}


async def listed(client: Client, cursor: str | None = None) -> dict[str, Any]:
    request = mt.ListTasksRequest(params=mt.PaginatedRequestParams(cursor=cursor))
    return (await client.session.send_request(request, Anything)).data()


async def every_page(client: Client) -> list[list[str]]:
    """The task ids of each `tasks/list` page, following `nextCursor` to the end."""
    pages, cursor = [], None
    while True:
        page = await listed(client, cursor)
        pages.append([t["taskId"] for t in page["tasks"]])
        if (cursor := page.get("nextCursor")) is None:
            return pages


@pytest.mark.parametrize("store", ["memory", "sqlite", "redis", "postgres"])
def test_tasks_created_at_once_are_all_listed_page_by_page_and_only_to_their_user(
    make_hub: HubFactory, request: Any, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(surface_tasks, "PAGE", 8)
    hub = make_hub(**store_url(request, store))

    async def go() -> None:
        async with connected(hub, "legacy") as (alice, _), connected(hub, "legacy", user="bob") as (bob, _):
            started = await asyncio.gather(
                *(start_core_task(alice.session, "assistant", {"message": "hello"}) for _ in range(20)),
                start_core_task(bob.session, "assistant", {"message": "hello"}),
            )
            *alices, bobs = [handle.task_id for handle in started]
            pages = await every_page(alice)
            assert [len(page) for page in pages] == [8, 8, 4]
            assert sorted(task for page in pages for task in page) == sorted(alices)  # each once, none of bob's
            assert await every_page(bob) == [[bobs]]
            # Alice's cursor only says where her page ends: bob reading on from it reads his own tasks, if any.
            second = (await listed(alice))["nextCursor"]
            assert {t["taskId"] for t in (await listed(bob, second))["tasks"]} <= {bobs}

    asyncio.run(go())


@pytest.mark.parametrize(
    "cursor",
    ["not a cursor", "", "eyJhIjogMX0=", "WzEsIDJd", "WyIxIiwgInRhc2tfMSJd", "Wy0xLCAidGFza18xIl0="],
    ids=["text", "empty", "object", "numbers", "string-expiry", "negative"],
)
def test_a_tasks_list_cursor_the_hub_did_not_give_is_invalid_params(hub: RunningHub, cursor: str) -> None:
    async def go() -> None:
        async with connected(hub, "legacy") as (client, _):
            with pytest.raises(MCPError, match="cursor") as refused:
                await listed(client, cursor)
            assert refused.value.error.code == mt.INVALID_PARAMS

    asyncio.run(go())


def test_an_update_answering_an_expired_question_fails_and_takes_nothing(hub: RunningHub) -> None:
    async def go() -> None:
        async with tasks_client(hub) as (client, _):
            handle = await start(client, '/call mrtr.deploy {"name": "web"}')
            task = await get(client, handle.task_id)
            ids = {r["params"]["message"]: k for k, r in task["inputRequests"].items()}
            expired, region = ids["Deploy web?"], ids["Which region?"]
            hub.on_loop(hub.hub.broker.end(expired, State.EXPIRED))  # what the broker does at its deadline
            assert list((await get(client, handle.task_id))["inputRequests"]) == [region]
            both = {region: EU, expired: {"action": "accept", "content": {"confirm": True}}}
            with pytest.raises(MCPError) as refused:
                await update(client, handle.task_id, both)
            assert refused.value.error.code == mt.INVALID_PARAMS
            assert refused.value.error.message.startswith(f"Elicitation {expired!r} has expired")
            assert refused.value.error.data == {"code": "expired", "elicitationId": expired}
            assert list((await get(client, handle.task_id))["inputRequests"]) == [region]  # nothing was taken
            assert ack(await update(client, handle.task_id, {region: EU}))
            assert (await until_ended(client, handle.task_id))["status"] == "completed"

    asyncio.run(go())
