"""The hub's agent as an A2A agent, driven by the a2a-sdk's own client (and raw JSON-RPC for 0.3 and bad paths)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import httpx
import mcp_types as mt
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value
from mcp.shared.exceptions import MCPError

import elicithub
from elicithub.core.elicitation import State
from elicithub.core.events import RequestEvent, RunFinished
from elicithub.core.runs import conversation_key
from elicithub.runtime.conversations import Caller
from elicithub.surfaces.a2a.agent import TaskRun, paused_at
from tests.conftest import USERS, HubAddress, RunningHub
from tests.core_fixtures import until
from tests.shapes import assert_shaped
from tests.surfaces.mcp.test_server import connected, retry

PROVISION = '/call mrtr.provision {"name": "orders"}'
RENAME = '/call mrtr.rename {"name": "orders"}'
INPUT = TaskState.TASK_STATE_INPUT_REQUIRED


def token(user: str) -> str:
    return next(u["token"] for u in USERS if u["id"] == user)


@asynccontextmanager
async def a2a_client(hub: HubAddress, user: str = "alice", streaming: bool = False) -> AsyncIterator[Client]:
    http = httpx.AsyncClient(headers={"authorization": f"Bearer {token(user)}"}, timeout=30)
    async with http:
        client = await ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create_from_url(hub.url)
        async with client:
            yield client


def message(text: str | None = None, data: dict[str, Any] | None = None, task: Task | None = None) -> Message:
    parts = []
    if text is not None:
        parts.append(Part(text=text))
    if data is not None:
        parts.append(Part(data=ParseDict(data, Value())))
    return Message(
        role=Role.ROLE_USER,
        parts=parts,
        message_id=str(uuid.uuid4()),
        task_id=task.id if task is not None else "",
        context_id=task.context_id if task is not None else "",
    )


async def send(client: Client, msg: Message) -> list[StreamResponse]:
    return [event async for event in client.send_message(SendMessageRequest(message=msg))]


async def task_of(client: Client, msg: Message) -> Task:
    [response] = await send(client, msg)
    assert response.WhichOneof("payload") == "task", response
    return response.task


def label(event: StreamResponse) -> str:
    """A stream event as a test reads it: its task state's name, or `artifact:TEXT`."""
    kind = event.WhichOneof("payload")
    if kind == "artifact_update":
        return "artifact:" + get_artifact_text(event.artifact_update.artifact)
    status = event.task.status if kind == "task" else event.status_update.status
    return TaskState.Name(status.state)


def question(task: Task) -> dict[str, Any]:
    data = get_data_parts(list(task.status.message.parts))[0]
    elicitation: dict[str, Any] = data["elicitation"]
    return elicitation


def answer(task: Task, action: str = "accept", content: dict[str, Any] | None = None) -> Message:
    response: dict[str, Any] = {"elicitationId": question(task)["elicitationId"], "action": action}
    if content is not None:
        response["content"] = content
    return message(data={"elicitationResponse": response}, task=task)


def test_the_agent_card_declares_bearer_identity_and_the_json_rpc_endpoint(hub: RunningHub) -> None:
    card = httpx.get(f"{hub.url}/.well-known/agent-card.json").json()
    assert card["name"] == "elicithub" and card["capabilities"]["streaming"] is True
    [interface] = card["supportedInterfaces"]
    assert interface == {"url": f"{hub.url}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert [s["id"] for s in card["skills"]] == ["assistant"]


def test_the_agent_card_states_the_packages_version(hub: RunningHub) -> None:
    card = httpx.get(f"{hub.url}/.well-known/agent-card.json").json()
    assert card["version"] == version("elicithub") == elicithub.__version__


def test_without_a_users_token_the_endpoint_is_401(hub: RunningHub) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    response = httpx.post(f"{hub.url}/a2a", json=body, headers={"A2A-Version": "1.0"})
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
    wrong = httpx.post(f"{hub.url}/a2a", json=body, headers={"A2A-Version": "1.0", "authorization": "Bearer nope"})
    assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]


def test_a_question_makes_the_task_input_required_and_the_next_message_answers_it(hub: RunningHub) -> None:
    async def go() -> None:
        async with a2a_client(hub) as client:
            task = await task_of(client, message(PROVISION))
            assert task.status.state == INPUT
            assert "Which region should orders live in?" in get_message_text(task.status.message)
            asked = question(task)
            assert asked["type"] == "elicitation-request" and asked["mode"] == "form"
            assert asked["elicitationId"].startswith("eli_")
            assert set(asked["requestedSchema"]["properties"]) == {"region"}

            with pytest.raises(Exception, match="region") as bad:  # the field is named...
                await send(client, answer(task, content={"region": "mars"}))
            assert "region" in str(bad.value)
            again = await client.get_task(GetTaskRequest(id=task.id))
            assert again.status.state == INPUT  # ...and the task still waits

            done = await task_of(client, answer(task, content={"region": "eu-west-1"}))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert [get_artifact_text(a) for a in done.artifacts] == ["Provisioned orders in eu-west-1."]
        # The conversation is the hub's, like any other: the contextId names it.
        with hub.client() as chat:
            messages = chat.get(f"/run/api/conversations/{task.context_id}").json()["messages"]
        assert messages[-1] == {"role": "assistant", "text": "Provisioned orders in eu-west-1."}

    asyncio.run(go())


def test_a_paused_tasks_metadata_and_question_have_the_keys_of_their_shapes(hub: RunningHub) -> None:
    async def go() -> None:
        async with a2a_client(hub) as client:
            task = await task_of(client, message(PROVISION))
            asked = question(task)
            assert_shaped(asked, RequestEvent)
            run = paused_at(task)
            assert_shaped(run, TaskRun)
            assert run["elicitationIds"] == [asked["elicitationId"]]
            assert run["runId"].startswith("run_")

    asyncio.run(go())


def test_plain_text_answers_a_question_with_one_text_field_only(hub: RunningHub) -> None:
    async def go() -> None:
        async with a2a_client(hub) as client:
            task = await task_of(client, message(RENAME))
            assert task.status.state == INPUT
            done = await task_of(client, message("customers", task=task))
            assert [get_artifact_text(a) for a in done.artifacts] == ["Renamed orders to customers."]

            choice = await task_of(client, message(PROVISION))  # one string field, with a fixed set of values
            with pytest.raises(Exception, match="region"):
                await send(client, message("mars", task=choice))
            done = await task_of(client, message("us-east-1", task=choice))
            assert [get_artifact_text(a) for a in done.artifacts] == ["Provisioned orders in us-east-1."]

            two = await task_of(client, message('/call mrtr.deploy {"name": "web"}'))  # two questions at once
            assert len(get_data_parts(list(two.status.message.parts))) == 2
            with pytest.raises(Exception, match="elicitationResponse"):
                await send(client, message("eu-west-1", task=two))
            assert (await client.get_task(GetTaskRequest(id=two.id))).status.state == INPUT

    asyncio.run(go())


def test_streaming_shows_working_input_required_working_completed(hub: RunningHub) -> None:
    def states(events: list[StreamResponse]) -> list[str]:
        return [label(e) for e in events if e.WhichOneof("payload") != "message"]

    async def go() -> None:
        async with a2a_client(hub, streaming=True) as client:
            first = await send(client, message(PROVISION))
            assert states(first)[-2:] == ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"]
            task = await client.get_task(GetTaskRequest(id=first[0].task.id))
            second = await send(client, answer(task, content={"region": "us-east-1"}))
            assert states(second) == [
                "TASK_STATE_WORKING",
                "artifact:Provisioned orders in us-east-1.",  # the text as it streamed (one piece, here)
                "artifact:Provisioned orders in us-east-1.",  # the answer whole (test_streaming.py)
                "TASK_STATE_COMPLETED",
            ]

    asyncio.run(go())


def test_declining_goes_on_and_cancel_task_cancels_the_question(hub: RunningHub) -> None:
    async def go() -> None:
        async with a2a_client(hub) as client:
            task = await task_of(client, message(PROVISION))
            done = await task_of(client, answer(task, action="decline"))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert "the user chose decline" in get_artifact_text(done.artifacts[0])

            task = await task_of(client, message(PROVISION))
            elicitation_id = question(task)["elicitationId"]
            canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            late = hub.answer("alice", task.context_id, elicitation_id, "accept", {"region": "eu-west-1"})
            assert late.status_code == 409  # the question ended with the task

    asyncio.run(go())


def test_cancel_task_stops_the_run_without_calling_the_downstream_tool_again(hub: RunningHub) -> None:
    async def go() -> None:
        async with a2a_client(hub) as client:
            task = await task_of(client, message('/call mrtr.provision {"name": "a2a-stopped"}'))
            canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            asked, events = await asyncio.to_thread(hub.run_ended, question(task)["elicitationId"])
            assert hub.downstream_calls("provision", "a2a-stopped") == 1  # the round that asked; no retry
            assert asked.outcome == "cancelled"
            assert RunFinished("superseded") in events
            done = await client.get_task(GetTaskRequest(id=task.id))
            assert done.status.state == TaskState.TASK_STATE_CANCELED

    asyncio.run(go())


def test_another_user_cannot_see_or_answer_the_task(hub: RunningHub) -> None:
    async def go() -> None:
        async with a2a_client(hub) as alice, a2a_client(hub, "bob") as bob:
            task = await task_of(alice, message(PROVISION))
            with pytest.raises(Exception, match=r"(?i)not found"):
                await bob.get_task(GetTaskRequest(id=task.id))
            with pytest.raises(Exception, match=r"(?i)not found"):
                await send(bob, answer(task, content={"region": "eu-west-1"}))
            assert (await alice.get_task(GetTaskRequest(id=task.id))).status.state == INPUT

    asyncio.run(go())


def test_a_task_waiting_for_an_answer_survives_a_restart(make_hub: Any) -> None:
    first = make_hub()

    async def ask() -> Task:
        async with a2a_client(first) as client:
            return await task_of(client, message(PROVISION))

    task = asyncio.run(ask())
    first.stop()
    second = make_hub(first.port)  # same store, same name: it takes its runs back

    async def finish() -> None:
        async with a2a_client(second) as client:
            assert (await client.get_task(GetTaskRequest(id=task.id))).status.state == INPUT
            done = await task_of(client, answer(task, content={"region": "eu-west-1"}))
            assert [get_artifact_text(a) for a in done.artifacts] == ["Provisioned orders in eu-west-1."]

    asyncio.run(finish())


def test_0_3_method_names_are_accepted(hub: RunningHub) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {"role": "user", "parts": [{"kind": "text", "text": PROVISION}], "messageId": "m1"},
        },
    }
    headers = {"authorization": f"Bearer {token('alice')}"}
    result = httpx.post(f"{hub.url}/a2a", json=body, headers=headers, timeout=30).json()["result"]
    assert result["status"]["state"] == "input-required"


def test_a_task_can_be_followed_from_another_hub_sharing_the_store(make_hub: Any) -> None:
    first, second = make_hub(), make_hub()  # one SQLite store, one master key

    async def go() -> list[str]:
        async with a2a_client(first) as here, a2a_client(second, streaming=True) as there:
            task = await task_of(here, message(PROVISION))
            seen: list[str] = []
            snapshot = asyncio.Event()

            async def follow() -> None:
                async for event in there.subscribe(SubscribeToTaskRequest(id=task.id)):
                    seen.append(label(event))
                    snapshot.set()

            following = asyncio.create_task(follow())
            await asyncio.wait_for(snapshot.wait(), 30)
            await send(here, answer(task, content={"region": "eu-west-1"}))
            await asyncio.wait_for(following, 30)
            return seen

    seen = asyncio.run(go())
    assert seen[0] == "TASK_STATE_INPUT_REQUIRED" and seen[-1] == "TASK_STATE_COMPLETED"
    assert "artifact:Provisioned orders in eu-west-1." in seen


@pytest.mark.parametrize("literal", ["NaN", "-Infinity", "1e999", "-1e999"])
def test_a_number_json_cannot_carry_is_a_parse_error_and_changes_nothing(hub: RunningHub, literal: str) -> None:
    def raw_send(msg: Message) -> dict[str, Any]:
        params = json.dumps({"message": MessageToDict(msg)}).replace('"@number@"', literal)
        body = f'{{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {params}}}'
        headers = {
            "authorization": f"Bearer {token('alice')}",
            "content-type": "application/json",
            "A2A-Version": "1.0",
        }
        reply: dict[str, Any] = httpx.post(f"{hub.url}/a2a", content=body, headers=headers, timeout=30).json()
        return reply

    async def go() -> None:
        async with a2a_client(hub) as client:
            task = await task_of(client, message(PROVISION))
            refused = raw_send(answer(task, content={"region": "@number@"}))
            assert refused["error"]["code"] == -32700
            assert refused["error"]["message"].startswith(f"Parse error: {literal} ")
            again = await client.get_task(GetTaskRequest(id=task.id))
            assert again.status.state == INPUT  # the question still waits
            done = await task_of(client, answer(task, content={"region": "eu-west-1"}))
            assert [get_artifact_text(a) for a in done.artifacts] == ["Provisioned orders in eu-west-1."]

    asyncio.run(go())
    new = message(PROVISION)
    new.context_id = "ctx-non-finite"
    new.metadata.update({"anything": "@number@"})
    assert raw_send(new)["error"]["code"] == -32700
    with hub.client() as chat:  # nothing ran
        assert chat.get("/run/api/conversations/ctx-non-finite").status_code == 404


DEPLOY = '/call mrtr.deploy {"name": "web"}'
"""Asks two questions in one round: `Which region?` and `Deploy web?`."""


def answering(task: Task, *responses: dict[str, Any]) -> Message:
    """One message on `task` with a data part `{"elicitationResponse": ...}` for each of `responses`."""
    parts = [Part(data=ParseDict({"elicitationResponse": r}, Value())) for r in responses]
    return Message(
        role=Role.ROLE_USER, parts=parts, message_id=str(uuid.uuid4()), task_id=task.id, context_id=task.context_id
    )


def asked_by_message(task: Task) -> dict[str, str]:
    """The task's questions: their elicitation id by their text."""
    events = [d["elicitation"] for d in get_data_parts(list(task.status.message.parts))]
    return {e["message"]: e["elicitationId"] for e in events}


def pending(hub: HubAddress, conversation_id: str) -> list[str]:
    with hub.client() as chat:
        shown = chat.get(f"/run/api/conversations/{conversation_id}").json()
    return sorted(e["elicitationId"] for e in shown["pending"])


def test_answers_in_one_message_are_all_checked_before_any_is_taken(hub: RunningHub) -> None:
    async def go() -> None:
        async with a2a_client(hub) as client:
            task = await task_of(client, message(DEPLOY))
            ids = asked_by_message(task)
            region = {"elicitationId": ids["Which region?"], "action": "accept", "content": {"region": "eu-west-1"}}
            bad = {"elicitationId": ids["Deploy web?"], "action": "accept", "content": {"confirm": "sure"}}
            with pytest.raises(InvalidParamsError) as refused:
                await send(client, answering(task, region, bad))
            assert refused.value.data is not None
            assert [f["field"] for f in refused.value.data["fields"]] == ["confirm"]
            # The first answer, good as it was, was not taken either: both questions still wait.
            assert pending(hub, task.context_id) == sorted(ids.values())
            assert (await client.get_task(GetTaskRequest(id=task.id))).status.state == INPUT
            good = {**bad, "content": {"confirm": True}}
            done = await task_of(client, answering(task, region, good))
            assert [get_artifact_text(a) for a in done.artifacts] == ["Deployed web to eu-west-1."]

    asyncio.run(go())


def test_an_answer_to_an_expired_question_fails_its_message_alike_on_a2a_and_mcp(hub: RunningHub) -> None:
    """Like the REST answer's 410: the request fails naming the expired question, and none of its answers is
    taken (the question still open stays open, for a message or retry that answers it alone)."""

    def expire(elicitation_id: str) -> None:
        hub.on_loop(hub.hub.broker.end(elicitation_id, State.EXPIRED))  # what the broker does at its deadline

    async def on_a2a() -> tuple[str, str, dict[str, Any] | None, list[str]]:
        async with a2a_client(hub) as client:
            task = await task_of(client, message(DEPLOY))
            ids = asked_by_message(task)
            expire(ids["Deploy web?"])
            region = {"elicitationId": ids["Which region?"], "action": "accept", "content": {"region": "eu-west-1"}}
            confirm = {"elicitationId": ids["Deploy web?"], "action": "accept", "content": {"confirm": True}}
            with pytest.raises(InvalidParamsError) as refused:  # JSON-RPC -32602
                await send(client, answering(task, region, confirm))
            assert (await client.get_task(GetTaskRequest(id=task.id))).status.state == INPUT
            return ids["Deploy web?"], refused.value.message, refused.value.data, pending(hub, task.context_id)

    async def on_mcp() -> tuple[str, str, dict[str, Any] | None, list[str]]:
        async with connected(hub, "2026-07-28") as (client, _):
            arguments = {"message": DEPLOY, "conversationId": "mcp-expired"}
            first = await retry(client, arguments, None)
            assert isinstance(first, mt.InputRequiredResult)
            ids = {r.params.message: k for k, r in (first.input_requests or {}).items()}  # type: ignore[union-attr]
            expire(ids["Deploy web?"])
            region = mt.ElicitResult(action="accept", content={"region": "eu-west-1"})
            both = {ids["Which region?"]: region, ids["Deploy web?"]: mt.ElicitResult(action="accept")}
            with pytest.raises(MCPError) as refused:
                await retry(client, arguments, first.request_state, both)
            assert refused.value.error.code == mt.INVALID_PARAMS
            left = pending(hub, "mcp-expired")
            # Nothing was used up: the state still takes the answer to the question left open.
            done = await retry(client, arguments, first.request_state, {ids["Which region?"]: region})
            assert isinstance(done, mt.CallToolResult)
            return ids["Deploy web?"], refused.value.error.message, refused.value.error.data, left

    for expired, said, data, left in (asyncio.run(on_a2a()), asyncio.run(on_mcp())):
        assert said == f"Elicitation {expired!r} has expired; the tool call was not completed."
        assert data == {"code": "expired", "elicitationId": expired}
        assert len(left) == 1 and expired not in left  # the other question of the message still waits


def test_cancel_task_stops_a_run_that_has_not_paused_yet(hub: RunningHub) -> None:
    mrtr = next(s.url for s in hub.config.mcp_servers if s.id == "mrtr")
    assert mrtr is not None

    async def cancel_while_held() -> Task:
        async with a2a_client(hub, streaming=True) as client, a2a_client(hub) as other:
            events = client.send_message(SendMessageRequest(message=message('/call mrtr.hold {"name": "early"}')))
            try:
                async for event in events:  # the task works on its call, which the server holds: no question yet
                    if label(event) == "TASK_STATE_WORKING" and event.WhichOneof("payload") == "status_update":
                        break
                task = await other.get_task(GetTaskRequest(id=event.status_update.task_id))
                await until(lambda: hub.downstream_calls("hold", "early") == 1, timeout_s=60)  # the call is held
                canceled = await other.cancel_task(CancelTaskRequest(id=task.id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                await events.aclose()
            finally:
                async with httpx.AsyncClient() as http:
                    await http.post(mrtr.removesuffix("/mcp") + "/debug/release", params={"name": "early"})
        return task

    async def kept_after_the_run(task: Task) -> list[Any]:
        """Once the run has finished: the messages its conversation kept."""
        run_id = MessageToDict(task.metadata)["elicithub"]["runId"]
        following = await hub.hub.conversations.follow(Caller("alice"), task.context_id, run_id, 0)
        assert isinstance([event async for _, event in following.events][-1], RunFinished)
        conversation = await hub.hub.backend.conversations.get(conversation_key("alice", task.context_id))
        assert conversation is not None and conversation.active_run_id is None
        return list(conversation.messages)

    task = asyncio.run(cancel_while_held())
    kept = hub.on_loop(kept_after_the_run(task))
    assert [m["role"] for m in kept] == ["user"]  # the stopped run's reply ("Released early.") is not kept
    assert hub.downstream_calls("hold", "early") == 1
