"""Agents that delegate: a child run's question reaches the person on the parent's stream with its agent path, is
answered like any other, and the parent goes on with the child's answer; after a restart the same child goes on."""

from __future__ import annotations

import json
from typing import Any

from openai import OpenAI

from tests.conftest import HubFactory, McpProcess, RunningHub
from tests.server.test_chat_openai import conversation, items, run_answering
from tests.server.test_durable import provisioned, reattached_text

AGENTS = [
    {"id": "assistant", "tools": ["mrtr", "legacy", "researcher"]},
    {"id": "researcher", "description": "Looks things up.", "tools": ["mrtr"]},
]


def delegate(message: str, agent: str = "researcher") -> str:
    return f"/call {agent}.delegate " + json.dumps({"message": message})


def provision(name: str) -> str:
    return "/call mrtr.provision " + json.dumps({"name": name})


def test_a_delegated_agents_question_reaches_the_person_and_the_parent_goes_on(make_hub: HubFactory) -> None:
    hub = make_hub(agents=AGENTS)
    text, events = run_answering(hub, delegate(provision("deleg1")), [("accept", {"region": "eu-west-1"})])
    [asked] = [e for e in events if e["type"] == "elicitation-request"]
    assert asked["context"]["agentPath"] == ["assistant", "researcher"]
    assert asked["context"]["toolName"] == "provision"
    assert text.endswith("Provisioned deleg1 in eu-west-1.")
    assert [e["outcome"] for e in events if e["type"] == "elicitation-resolved"] == ["accepted"]

    async def child_runs() -> list[Any]:
        elicitation = await hub.hub.store.get(asked["elicitationId"])
        assert elicitation is not None
        parent = await hub.hub.backend.runs.get(elicitation.run_id)  # shown on the run the person follows
        assert parent is not None and parent.agent == "assistant" and parent.parent_run_id is None
        return [r for r in await hub.hub.backend.runs.unfinished() if r.parent_run_id == parent.run_id]

    assert hub.on_loop(child_runs()) == []  # the child finished with the call


def test_each_agent_has_only_its_own_tools(make_hub: HubFactory) -> None:
    hub = make_hub(agents=AGENTS)
    text, _ = run_answering(hub, delegate('/call legacy.provision {"name": "x"}'), [])
    assert "There is no tool legacy.provision" in text
    # The child's questions are its own, answered like any other: declining ends its call, not the parent's.
    text, _ = run_answering(hub, delegate(provision("deleg2")), [("decline", None)])
    assert "the user chose decline" in text


def test_a_chat_picks_its_agent_and_an_unknown_model_name_is_the_default(make_hub: HubFactory) -> None:
    hub = make_hub(agents=AGENTS)

    def say(model: str, text: str) -> str:
        client = OpenAI(base_url=f"{hub.url}/run/v1", api_key="alice-secret", max_retries=0)
        stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], stream=True)
        return "".join(i for i in items(stream) if isinstance(i, str))

    assert "There is no tool legacy.provision" in say("researcher", '/call legacy.provision {"name": "y"}')
    assert "There is no tool researcher.delegate" in say("researcher", delegate("hi"))
    # Without elicitation support the legacy call cannot ask, but the assistant has the tool.
    assert "There is no tool" not in say("scripted", '/call legacy.provision {"name": "y"}')


def test_after_a_restart_the_same_child_goes_on(make_hub: HubFactory, mrtr_server: McpProcess) -> None:
    first = make_hub(agents=AGENTS)
    client = OpenAI(
        base_url=f"{first.url}/run/v1",
        api_key="alice-secret",
        default_headers={"x-supports-elicitation": "true"},
        max_retries=0,
    )
    stream = client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": delegate(provision("deleg3"))}], stream=True
    )
    asked = next(i for i in items(stream) if isinstance(i, dict) and i["type"] == "elicitation-request")
    conversation_id = conversation(stream)
    stream.close()
    first.stop()
    second: RunningHub = make_hub(first.port, agents=AGENTS)  # same store and name: it takes its runs back
    answered = second.answer("alice", conversation_id, asked["elicitationId"], "accept", {"region": "us-east-1"})
    assert answered.status_code == 200, answered.text
    assert reattached_text(second.url, conversation_id).endswith("Provisioned deleg3 in us-east-1.")
    assert provisioned(mrtr_server)["deleg3"] == 1  # the same child went on: it asked once and called once


NESTED = [
    {"id": "assistant", "tools": ["planner"]},
    {"id": "planner", "tools": ["researcher"]},
    {"id": "researcher", "tools": ["mrtr"]},
]


def open_stream(hub: RunningHub, text: str, conversation_id: str | None = None) -> Any:
    headers = {"x-supports-elicitation": "true"}
    if conversation_id is not None:
        headers["x-conversation-id"] = conversation_id
    client = OpenAI(base_url=f"{hub.url}/run/v1", api_key="alice-secret", default_headers=headers, max_retries=0)
    return client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": text}], stream=True)


def delegation_chain(hub: RunningHub, elicitation_id: str) -> list[Any]:
    """The runs from the one the person follows down to the one that asked, each found in its parent's pause."""

    async def chain() -> list[Any]:
        elicitation = await hub.hub.store.get(elicitation_id)
        assert elicitation is not None
        runs = [await hub.hub.backend.runs.get(elicitation.run_id)]
        while runs[-1] is not None and runs[-1].pause is not None and runs[-1].pause.child_run_id is not None:
            runs.append(await hub.hub.backend.runs.get(runs[-1].pause.child_run_id))
        return runs

    return hub.on_loop(chain())


def test_each_delegated_runs_parent_is_the_run_that_delegated_to_it(make_hub: HubFactory) -> None:
    hub = make_hub(agents=NESTED)
    stream = open_stream(hub, delegate(delegate(provision("deleg4")), agent="planner"))
    asked = next(i for i in items(stream) if isinstance(i, dict) and i["type"] == "elicitation-request")
    assert asked["context"]["agentPath"] == ["assistant", "planner", "researcher"]
    top, child, grandchild = delegation_chain(hub, asked["elicitationId"])
    assert [r.agent for r in (top, child, grandchild)] == ["assistant", "planner", "researcher"]
    assert top.parent_run_id is None
    assert child.parent_run_id == top.run_id
    assert grandchild.parent_run_id == child.run_id  # its immediate parent, not the top run
    answered = hub.answer("alice", conversation(stream), asked["elicitationId"], "accept", {"region": "eu-west-1"})
    assert answered.status_code == 200, answered.text
    assert "".join(i for i in items(stream) if isinstance(i, str)).endswith("Provisioned deleg4 in eu-west-1.")


def test_a_new_message_ends_the_delegated_runs_and_cancels_their_questions(
    make_hub: HubFactory, mrtr_server: McpProcess
) -> None:
    # A deadline short enough that a question left open would show as expired rather than hang the test.
    hub = make_hub(agents=NESTED, elicitation={"timeout_s": 20})
    old = open_stream(hub, delegate(delegate(provision("deleg5")), agent="planner"))
    asked = next(i for i in items(old) if isinstance(i, dict) and i["type"] == "elicitation-request")
    runs = delegation_chain(hub, asked["elicitationId"])
    assert len(runs) == 3

    new = open_stream(hub, "hello", conversation(old))
    assert "".join(i for i in items(new) if isinstance(i, str))  # the new message runs at once
    rest = list(items(old))  # the old stream ends: nobody is left waiting for an answer
    assert {"type": "elicitation-resolved", "elicitationId": asked["elicitationId"], "outcome": "cancelled"} in rest

    async def after() -> list[Any]:
        return [await hub.hub.backend.runs.get(r.run_id) for r in runs]

    ended = hub.on_loop(after())
    assert [r.status for r in ended] == ["finished", "finished", "finished"]
    # Each run ends with the call it was in: no turn after it, no call the model might still ask for.
    assert [r.messages[-1]["role"] for r in ended] == ["tool", "tool", "tool"]
    assert "deleg5" not in provisioned(mrtr_server)
    assert hub.downstream_calls("provision", "deleg5") == 1  # the round that asked; no retry with the cancel
