"""A2A agents downstream, end to end: the openai client, the hub, and a real a2a-sdk agent that asks questions."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types import GetTaskRequest, Role, SendMessageRequest

from tests.auth.conftest import Browser, TrackerProcess
from tests.auth.test_credential_flow import converse, requests_of
from tests.conftest import SERVERS, USERS, HubFactory, RunningHub, free_port, sse_data, wait_for_port
from tests.server.test_chat_openai import chat, conversation, items
from tests.server.test_durable import reattached_text
from tests.server.test_scale_out import ServedHub


class AgentProcess:
    """tests/servers/a2a_agent.py in its own process."""

    def __init__(self, *args: str, binding: str = "jsonrpc") -> None:
        self.port = free_port()
        env = {**os.environ, "A2A_BINDING": binding}
        self.process = subprocess.Popen([sys.executable, str(SERVERS / "a2a_agent.py"), str(self.port), *args], env=env)
        wait_for_port(self.port)
        self.url = f"http://127.0.0.1:{self.port}"

    def calls(self, task_id: str | None = None) -> list[dict[str, Any]]:
        log: list[dict[str, Any]] = httpx.get(f"{self.url}/debug/log").json()
        return [c for c in log if task_id is None or c["taskId"] == task_id]

    def responses(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = httpx.get(f"{self.url}/debug/responses").json()
        return found

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def travel() -> Iterator[AgentProcess]:
    agent = AgentProcess()
    yield agent
    agent.kill()


@pytest.fixture
def own_travel() -> Iterator[AgentProcess]:
    """An agent for one test, which may kill it."""
    agent = AgentProcess()
    yield agent
    agent.kill()


def agent_entry(agent: AgentProcess, **extra: Any) -> dict[str, Any]:
    return {"id": "travel", "url": agent.url, **extra}


@pytest.fixture
def travel_hub(make_hub: HubFactory, travel: AgentProcess) -> RunningHub:
    return make_hub(a2a_agents=[agent_entry(travel)])


def call(text: str) -> str:
    return "/call travel.send_message " + json.dumps({"message": text})


def answer_with(hub: RunningHub, action: str, content: Any = None) -> Any:
    def on_request(event: dict[str, Any], conversation_id: str) -> None:
        response = hub.answer("alice", conversation_id, event["elicitationId"], action, content)
        assert response.status_code == 200, response.text

    return on_request


def test_the_agent_is_one_tool_described_from_its_card(travel_hub: RunningHub) -> None:
    text, _ = converse(travel_hub, "hello")
    assert "- travel.send_message: Send a message to the A2A agent Travel: Books trips" in text
    assert "Book a trip" not in text  # the card's skills are for the model, not lines of the help's tool list


def test_a_plain_answer_at_once_is_the_result(travel_hub: RunningHub) -> None:
    text, events = converse(travel_hub, call("hello there"))
    assert events == []
    assert text == "You said: hello there"


def test_a_question_in_words_becomes_a_one_field_form(travel_hub: RunningHub, travel: AgentProcess) -> None:
    text, events = converse(
        travel_hub, call("plain trip to Oslo"), answer_with(travel_hub, "accept", {"answer": "Lisbon"})
    )
    request, resolved = events
    assert request["mode"] == "form"
    assert request["message"] == "Which city are you flying from?"
    assert request["requestedSchema"] == {
        "type": "object",
        "properties": {"answer": {"type": "string", "title": "Which city are you flying from?"}},
        "required": ["answer"],
    }
    task_id = request["context"]["taskId"]
    assert request["context"] == {"trigger": "a2a_input_required", "agentId": "travel", "taskId": task_id}
    assert resolved["outcome"] == "accepted"
    assert text == "Your trip is booked.\nBooked a trip from Lisbon."
    sent = [c for c in travel.calls(task_id) if c["method"] == "SendMessage"]
    assert [c["text"] for c in sent] == ["Lisbon"]  # the answer, on the same task


def test_an_agent_that_speaks_http_json_is_answered_the_same_way(make_hub: HubFactory) -> None:
    agent = AgentProcess(binding="rest")
    try:
        hub = make_hub(a2a_agents=[agent_entry(agent)])
        text, _ = converse(hub, call("plain by REST"), answer_with(hub, "accept", {"answer": "Bergen"}))
        assert text == "Your trip is booked.\nBooked a trip from Bergen."
    finally:
        agent.kill()


def test_another_hubs_question_keeps_its_schema_and_gets_our_own_id(
    travel_hub: RunningHub, travel: AgentProcess
) -> None:
    before = len(travel.responses())
    text, events = converse(
        travel_hub, call("form trip"), answer_with(travel_hub, "accept", {"travellers": 2, "cabin": "business"})
    )
    request = requests_of(events)[0]
    assert request["message"] == "How many travellers, in which cabin?"
    assert request["requestedSchema"]["properties"]["travellers"] == {
        "type": "integer",
        "title": "Travellers",
        "minimum": 1,
        "maximum": 9,
    }
    assert request["elicitationId"].startswith("eli_") and request["elicitationId"] != "remote-eli-1"
    assert text == "Booked 2 travellers in business."
    [response] = travel.responses()[before:]
    assert response == {
        "elicitationId": "remote-eli-1",
        "action": "accept",
        "content": {"travellers": 2, "cabin": "business"},
    }


def test_bad_content_is_422_and_the_question_stays_open(travel_hub: RunningHub) -> None:
    statuses: list[int] = []

    def on_request(event: dict[str, Any], conversation_id: str) -> None:
        bad = travel_hub.answer("alice", conversation_id, event["elicitationId"], "accept", {"travellers": 12})
        statuses.append(bad.status_code)
        assert {e["field"] for e in bad.json()["error"]["fields"]} >= {"travellers", "cabin"}, bad.text
        good = {"travellers": 3, "cabin": "economy"}
        statuses.append(travel_hub.answer("alice", conversation_id, event["elicitationId"], "accept", good).status_code)

    text, _ = converse(travel_hub, call("form trip"), on_request)
    assert statuses == [422, 200]
    assert text == "Booked 3 travellers in economy."


def test_declining_a_question_in_words_cancels_the_task(travel_hub: RunningHub, travel: AgentProcess) -> None:
    text, events = converse(travel_hub, call("plain trip"), answer_with(travel_hub, "decline"))
    task_id = events[0]["context"]["taskId"]
    assert events[-1]["outcome"] == "declined"
    assert text.startswith("Tool error: The user did not answer when the A2A agent travel asked")
    assert "its task was cancelled" in text
    assert [c["method"] for c in travel.calls(task_id)] == ["CancelTask"]


def test_declining_another_hubs_question_is_passed_on(travel_hub: RunningHub, travel: AgentProcess) -> None:
    before = len(travel.responses())
    text, _ = converse(travel_hub, call("form trip"), answer_with(travel_hub, "decline"))
    assert travel.responses()[before:] == [{"elicitationId": "remote-eli-1", "action": "decline"}]
    assert text == "No booking made."


def test_a_sign_in_link_becomes_a_url_question_and_the_task_goes_on(
    travel_hub: RunningHub, travel: AgentProcess
) -> None:
    def sign_in(event: dict[str, Any], conversation_id: str) -> None:
        assert httpx.get(event["url"]).status_code == 200  # the person signs in at the agent
        response = travel_hub.answer("alice", conversation_id, event["elicitationId"], "accept")
        assert response.status_code in (200, 409), response.text  # the hub may have seen the task go on first

    text, events = converse(travel_hub, call("auth trip"), sign_in)
    request, resolved = events
    assert request["mode"] == "url"
    assert request["url"].startswith(f"{travel.url}/signin?task=")
    assert request["message"].startswith("Sign in to Travel at ")
    assert request["context"]["trigger"] == "a2a_input_required"
    assert resolved["outcome"] == "accepted"
    assert text == "Signed in; your trip is booked."


def test_an_agent_that_asks_for_ever_is_stopped_after_max_rounds(make_hub: HubFactory, travel: AgentProcess) -> None:
    hub = make_hub(a2a_agents=[agent_entry(travel)], elicitation={"max_rounds": 2})
    text, events = converse(hub, call("again and again"), answer_with(hub, "accept", {"answer": "yes"}))
    assert len(requests_of(events)) == 2
    assert text == (
        "Tool error: The A2A agent travel kept asking for input for more than 2 rounds; its task was cancelled."
    )


def test_without_elicitation_support_a_question_is_a_tool_error(travel_hub: RunningHub, travel: AgentProcess) -> None:
    text, events = converse(travel_hub, call("plain trip"), elicitation=False)
    assert events == []
    assert text.startswith("Tool error: The A2A agent travel needs input from the user ('Which city")
    assert travel.calls()[-1]["method"] == "CancelTask"  # nobody can answer: the task is not left waiting


def test_an_agent_killed_mid_question_is_a_clear_tool_error(make_hub: HubFactory, own_travel: AgentProcess) -> None:
    hub = make_hub(a2a_agents=[agent_entry(own_travel)])

    def kill_then_answer(event: dict[str, Any], conversation_id: str) -> None:
        own_travel.kill()
        assert (
            hub.answer("alice", conversation_id, event["elicitationId"], "accept", {"answer": "Rome"}).status_code
            == 200
        )

    text, _ = converse(hub, call("plain trip"), kill_then_answer)
    assert text.startswith("Tool error: The A2A agent travel failed during send_message: ")
    # Its card is remembered, so the tool is still offered; calling it says what is wrong.
    text, _ = converse(hub, call("hello"))
    assert text.startswith("Tool error: The A2A agent travel failed during send_message: ")


def test_an_unreachable_agent_is_left_out_of_the_tools(make_hub: HubFactory, travel: AgentProcess) -> None:
    hub = make_hub(a2a_agents=[{"id": "ghost", "url": f"http://127.0.0.1:{free_port()}"}, agent_entry(travel)])
    text, _ = converse(hub, "hello")
    assert "travel.send_message" in text and "ghost" not in text
    text, _ = converse(hub, '/call ghost.send_message {"message": "hi"}')
    assert text.startswith("There is no tool ghost.send_message.")


def test_project_credential_is_sent_as_a_bearer_token(make_hub: HubFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = AgentProcess("travel-token-1")
    try:
        monkeypatch.setenv("TRAVEL_TOKEN", "travel-token-1")
        hub = make_hub(a2a_agents=[agent_entry(agent, credential_scope="project", credential_env="TRAVEL_TOKEN")])
        text, _ = converse(hub, call("hello"))
        assert text == "You said: hello"
        assert {c["authorization"] for c in agent.calls() if c["method"] == "SendMessage"} == {"Bearer travel-token-1"}
        monkeypatch.setenv("TRAVEL_TOKEN", "wrong-token")
        text, _ = converse(hub, call("hello"))
        assert text == "Tool error: Travel rejected the credential for travel.send_message."
        monkeypatch.delenv("TRAVEL_TOKEN")
        text, _ = converse(hub, call("hello"))
        assert text == "Tool error: The hub has no credential for Travel: set $TRAVEL_TOKEN."
    finally:
        agent.kill()


def test_after_a_restart_the_task_is_picked_up_not_sent_again(make_hub: HubFactory, travel: AgentProcess) -> None:
    first = make_hub(a2a_agents=[agent_entry(travel)])
    stream = chat(first, call("plain restart"))
    request = next(i for i in items(stream) if isinstance(i, dict) and i["type"] == "elicitation-request")
    conversation_id = conversation(stream)
    stream.close()
    first.stop()  # the question stays open in the store

    second = make_hub(first.port, a2a_agents=[agent_entry(travel)])
    response = second.answer("alice", conversation_id, request["elicitationId"], "accept", {"answer": "Porto"})
    assert response.status_code == 200, response.text
    with second.client() as client:
        with client.stream("GET", f"/run/api/conversations/{conversation_id}/stream") as following:
            following.read()
        messages = client.get(f"/run/api/conversations/{conversation_id}").json()["messages"]
    assert messages[-1]["text"] == "Your trip is booked.\nBooked a trip from Porto."
    task_id = request["context"]["taskId"]
    sent = [c for c in travel.calls() if c["method"] == "SendMessage" and "restart" in c["text"]]
    assert len(sent) == 1  # the first message went out once
    methods = [c["method"] for c in travel.calls(task_id)]
    assert "GetTask" in methods and methods.count("SendMessage") == 1  # then: picked up, and answered once


def test_a_user_scoped_agent_gets_the_persons_own_token(
    make_hub: HubFactory, tracker: TrackerProcess, browser: Browser
) -> None:
    agent = AgentProcess("*")
    try:
        entry = agent_entry(agent, credential_scope="user", oauth={"issuer": tracker.base})
        hub = make_hub(a2a_agents=[entry])
        text, events = converse(hub, call("hello"), lambda e, _: browser.sign_in(e["url"]))
        request, resolved = events
        assert request["mode"] == "url"
        assert request["context"] == {
            "trigger": "credential_required",
            "serverId": "travel",
            "toolName": "send_message",
        }
        assert resolved["outcome"] == "accepted"
        assert text == "You said: hello"
        credential = hub.on_loop(hub.hub.vault.credential("travel", "alice"))
        assert credential is not None
        assert [c["authorization"] for c in agent.calls()] == [f"Bearer {credential.access_token}"]
        # Bob has not signed in: without a chat that can ask, he is told to connect.
        text, _ = converse(hub, call("hello"), user="bob", elicitation=False)
        assert text == (
            "Tool error: Tool travel.send_message requires user authentication. The user needs to connect their "
            "Travel account before this tool can be used."
        )
    finally:
        agent.kill()


def test_an_agent_that_never_answers_is_a_timeout_error(make_hub: HubFactory, travel: AgentProcess) -> None:
    hub = make_hub(a2a_agents=[agent_entry(travel, timeout_s=1)])
    text, _ = converse(hub, call("slow trip"))
    assert text == "Tool error: The A2A agent travel failed during send_message: no response within 1 s"


def test_an_agent_killed_during_a_sign_in_ends_the_question(make_hub: HubFactory, own_travel: AgentProcess) -> None:
    hub = make_hub(a2a_agents=[agent_entry(own_travel)])
    text, events = converse(hub, call("auth trip"), lambda e, _: own_travel.kill())
    assert [e.get("outcome") for e in events] == [None, "cancelled"]
    assert text.startswith("Tool error: The A2A agent travel failed during send_message: ")


def test_kill_9_with_a_question_open_then_restart_completes_the_task_once(tmp_path: Path, travel: AgentProcess) -> None:
    config = tmp_path / "hub.yaml"
    data = {
        "store": {"url": f"sqlite:///{tmp_path / 'hub.db'}"},
        "secrets": {"key_file": str(tmp_path / "secret.key")},
        "users": USERS,
        "a2a_agents": [agent_entry(travel)],
    }
    config.write_text(json.dumps(data))
    first = ServedHub(config, tmp_path / "first.log")
    second: ServedHub | None = None
    try:
        first.wait()
        stream = chat(first, call("plain killed"))
        request = next(i for i in items(stream) if isinstance(i, dict) and i["type"] == "elicitation-request")
        conversation_id = conversation(stream)
        stream.close()
        first.process.kill()  # SIGKILL: nothing is cancelled, downstream or here
        first.process.wait()

        second = ServedHub(config, tmp_path / "second.log")  # restarted; a new port, as the old one may be taken
        second.wait()
        response = second.answer("alice", conversation_id, request["elicitationId"], "accept", {"answer": "Faro"})
        assert response.status_code == 200, response.text
        assert reattached_text(second.url, conversation_id) == "Your trip is booked.\nBooked a trip from Faro."
    finally:
        for hub in (first, second):
            if hub is not None and hub.process.poll() is None:
                hub.process.kill()
                hub.process.wait()
    sent = [c for c in travel.calls() if c["method"] == "SendMessage" and "killed" in c["text"]]
    assert len(sent) == 1
    methods = [c["method"] for c in travel.calls(request["context"]["taskId"])]
    assert "GetTask" in methods and methods.count("SendMessage") == 1


def test_an_unanswered_question_expires_and_cancels_the_task(make_hub: HubFactory, travel: AgentProcess) -> None:
    hub = make_hub(a2a_agents=[agent_entry(travel)], elicitation={"timeout_s": 1})
    text, events = converse(hub, call("plain trip"))
    assert [e.get("outcome") for e in events] == [None, "expired"]
    assert text == (
        "Tool error: The user did not answer when the A2A agent travel asked (declined, cancelled or no answer "
        "within 1 s); its task was cancelled."
    )
    assert [c["method"] for c in travel.calls(events[0]["context"]["taskId"])] == ["CancelTask"]


async def answer_directly(agent: AgentProcess, task_id: str, text: str) -> None:
    """Answer the agent's task over A2A ourselves, as the hub would have just before it died."""
    async with httpx.AsyncClient() as http:
        client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(agent.url)
        task = await client.get_task(GetTaskRequest(id=task_id))
        message = new_text_message(text, role=Role.ROLE_USER, task_id=task_id, context_id=task.context_id)
        async for _ in client.send_message(SendMessageRequest(message=message)):
            pass


def test_a_round_answered_before_the_restart_is_not_answered_again(make_hub: HubFactory, travel: AgentProcess) -> None:
    first = make_hub(a2a_agents=[agent_entry(travel)])
    stream = chat(first, call("again after restart"))
    asked = next(i for i in items(stream) if isinstance(i, dict) and i["type"] == "elicitation-request")
    conversation_id = conversation(stream)
    stream.close()
    first.stop()
    task_id = asked["context"]["taskId"]
    asyncio.run(answer_directly(travel, task_id, "yes"))  # the answer got there; the hub died before it knew

    second = make_hub(first.port, a2a_agents=[agent_entry(travel)])
    with second.client() as client:
        with client.stream("GET", f"/run/api/conversations/{conversation_id}/stream") as following:
            parts = sse_data(following)
            resolved = next(p for p in parts if p["type"] == "data-elicitation-resolved")
            again = next(p for p in parts if p["type"] == "data-elicitation-request")
            # The same question again ("Anything else?") is a new one: it is asked, not answered with "yes".
            assert resolved["data"] == {
                "type": "elicitation-resolved",
                "elicitationId": asked["elicitationId"],
                "outcome": "cancelled",
            }
            assert again["data"]["message"] == asked["message"] and again["id"] != asked["elicitationId"]
            assert second.answer("alice", conversation_id, again["id"], "decline").status_code == 200
            list(parts)
    methods = [(c["method"], c.get("text")) for c in travel.calls(task_id)]
    # Ours (read, answer); then the hub's: picked up, and cancelled when the new question was declined.
    assert methods == [("GetTask", None), ("SendMessage", "yes"), ("GetTask", None), ("CancelTask", None)]
