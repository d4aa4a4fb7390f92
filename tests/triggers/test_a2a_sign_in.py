"""A downstream agent's sign-in (auth-required with a link): an agent still waiting after the person says they have
signed in is told so in one message on the task, never twice, even across a restart; one that goes on by itself,
or whose sign-in was declined, is told nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, TaskState

from tests.auth.test_credential_flow import converse
from tests.conftest import HubFactory, RunningHub, eventually
from tests.server.test_chat_openai import chat, conversation, items
from tests.server.test_durable import reattached_text
from tests.triggers.test_a2a_agents import AgentProcess, agent_entry, call

LONG = 600
"""A grace longer than any test: only the task moving on can end it."""


@pytest.fixture(scope="module")
def travel() -> Iterator[AgentProcess]:
    agent = AgentProcess()
    yield agent
    agent.kill()


def told(agent: AgentProcess, task_id: str) -> list[dict[str, Any]]:
    """The messages the hub sent on the task after the first one (which started it, without a task id)."""
    return [c for c in agent.calls(task_id) if c["method"] == "SendMessage"]


def task_state(agent: AgentProcess, task_id: str) -> TaskState:
    async def get() -> TaskState:
        async with httpx.AsyncClient() as http:
            client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(agent.url)
            return (await client.get_task(GetTaskRequest(id=task_id))).status.state

    return asyncio.run(get())


def sign_in_then_accept(hub: RunningHub) -> Callable[[dict[str, Any], str], None]:
    def on_request(event: dict[str, Any], conversation_id: str) -> None:
        assert httpx.get(event["url"]).status_code == 200  # the person signs in at the agent
        response = hub.answer("alice", conversation_id, event["elicitationId"], "accept")
        assert response.status_code in (200, 409), response.text  # 409: the hub saw the task go on first

    return on_request


def test_an_agent_that_waits_to_be_told_is_told_once_and_the_run_finishes(
    make_hub: HubFactory, travel: AgentProcess
) -> None:
    hub = make_hub(a2a_agents=[agent_entry(travel, sign_in_grace_s=0)])
    text, events = converse(hub, call("told trip"), sign_in_then_accept(hub))
    request, resolved = events
    assert request["mode"] == "url" and resolved["outcome"] == "accepted"
    assert text == "Told; your trip is booked."
    [message] = told(travel, request["context"]["taskId"])
    assert message["text"] == "I have signed in."
    assert message["data"] == [{"authCompleted": {"url": request["url"]}}]


def test_an_agent_that_goes_on_by_itself_within_the_grace_is_told_nothing(
    make_hub: HubFactory, travel: AgentProcess
) -> None:
    hub = make_hub(a2a_agents=[agent_entry(travel, sign_in_grace_s=LONG)])

    def accept_then_sign_in(event: dict[str, Any], conversation_id: str) -> None:
        # The person says they are done first; the agent sees the sign-in only afterwards, during the grace.
        assert hub.answer("alice", conversation_id, event["elicitationId"], "accept").status_code == 200
        assert httpx.get(event["url"]).status_code == 200

    text, events = converse(hub, call("auth trip"), accept_then_sign_in)
    assert text == "Signed in; your trip is booked."
    assert told(travel, events[0]["context"]["taskId"]) == []


def test_a_declined_sign_in_tells_nothing_and_cancels_the_task(make_hub: HubFactory, travel: AgentProcess) -> None:
    hub = make_hub(a2a_agents=[agent_entry(travel, sign_in_grace_s=0)])

    def decline(event: dict[str, Any], conversation_id: str) -> None:
        assert hub.answer("alice", conversation_id, event["elicitationId"], "decline").status_code == 200

    text, events = converse(hub, call("told trip"), decline)
    task_id = events[0]["context"]["taskId"]
    assert text.startswith("Tool error: The user did not sign in when the A2A agent travel asked")
    assert told(travel, task_id) == []
    assert task_state(travel, task_id) == TaskState.TASK_STATE_CANCELED


def test_a_hub_stopped_before_telling_leaves_it_to_the_next_hub_which_tells_once(
    make_hub: HubFactory, travel: AgentProcess
) -> None:
    first = make_hub(a2a_agents=[agent_entry(travel, sign_in_grace_s=LONG)])
    stream = chat(first, call("told before restart"))
    request = next(i for i in items(stream) if isinstance(i, dict) and i["type"] == "elicitation-request")
    conversation_id, task_id = conversation(stream), request["context"]["taskId"]
    assert httpx.get(request["url"]).status_code == 200
    assert first.answer("alice", conversation_id, request["elicitationId"], "accept").status_code == 200
    stream.close()
    first.stop()  # within the grace: the agent has not been told
    assert told(travel, task_id) == []

    second = make_hub(first.port, a2a_agents=[agent_entry(travel, sign_in_grace_s=0)])
    assert reattached_text(second.url, conversation_id) == "Told; your trip is booked."
    assert len(told(travel, task_id)) == 1


def test_a_hub_stopped_after_telling_is_not_followed_by_a_second_telling(
    make_hub: HubFactory, travel: AgentProcess
) -> None:
    first = make_hub(a2a_agents=[agent_entry(travel, sign_in_grace_s=0)])
    stream = chat(first, call("told hold after restart"))
    request = next(i for i in items(stream) if isinstance(i, dict) and i["type"] == "elicitation-request")
    conversation_id, task_id = conversation(stream), request["context"]["taskId"]
    assert httpx.get(request["url"]).status_code == 200
    assert first.answer("alice", conversation_id, request["elicitationId"], "accept").status_code == 200
    # Told; the agent holds its task in auth-required.
    eventually(lambda: len(told(travel, task_id)) == 1, "the agent was never told")
    stream.close()
    first.stop()
    assert task_state(travel, task_id) == TaskState.TASK_STATE_AUTH_REQUIRED

    # The next hub finds the task waiting as before, with no grace: it must wait for it, not tell it again. The
    # agent holds on, so the wait ends at the agent's deadline, however long the hub took to get there.
    second = make_hub(first.port, a2a_agents=[agent_entry(travel, sign_in_grace_s=0, timeout_s=2)])
    text = reattached_text(second.url, conversation_id)
    assert text.startswith("Tool error: The A2A agent travel failed during send_message")
    assert len(told(travel, task_id)) == 1
    httpx.get(f"{travel.url}/release", params={"task": task_id})  # let the held message finish
