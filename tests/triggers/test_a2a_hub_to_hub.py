"""Two hubs: one uses the other as its downstream A2A agent, and the second hub's question reaches the person."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_data_parts
from a2a.types import GetTaskRequest

from tests.auth.test_credential_flow import converse, requests_of
from tests.conftest import HubFactory, RunningHub

PROVISION = '/call mrtr.provision {"name": "orders"}'


@pytest.fixture
def hubs(make_hub: HubFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RunningHub, RunningHub]:
    """`near` (the person chats here) with `far` as its A2A agent `far`; each hub has its own store."""
    far = make_hub(store={"url": f"sqlite:///{tmp_path / 'far.db'}"})
    monkeypatch.setenv("FAR_TOKEN", "alice-secret")  # near calls far as alice
    agent = {"id": "far", "url": far.url, "credential_scope": "project", "credential_env": "FAR_TOKEN"}
    near = make_hub(a2a_agents=[agent])
    return near, far


async def asked_there(far: RunningHub, task_id: str) -> list[str]:
    """The ids of the questions far's task is waiting on, read as an A2A client (alice) would."""
    async with httpx.AsyncClient(headers={"authorization": "Bearer alice-secret"}) as http:
        client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(far.url)
        task = await client.get_task(GetTaskRequest(id=task_id))
    return [d["elicitation"]["elicitationId"] for d in get_data_parts(task.status.message.parts)]


def call_far(text: str) -> str:
    return "/call far.send_message " + json.dumps({"message": text})


def test_the_far_hubs_question_is_asked_here_under_our_own_id(hubs: tuple[RunningHub, RunningHub]) -> None:
    near, far = hubs
    far_ids: list[str] = []

    def answer(event: dict[str, Any], conversation_id: str) -> None:
        far_ids.extend(asyncio.run(asked_there(far, event["context"]["taskId"])))
        response = near.answer("alice", conversation_id, event["elicitationId"], "accept", {"region": "eu-west-1"})
        assert response.status_code == 200, response.text

    text, events = converse(near, call_far(PROVISION), answer)
    [request] = requests_of(events)
    assert request["message"] == "Which region should orders live in?"
    assert request["requestedSchema"]["properties"]["region"]["oneOf"][0] == {"const": "us-east-1", "title": "US East"}
    assert request["context"]["trigger"] == "a2a_input_required" and request["context"]["agentId"] == "far"
    assert len(far_ids) == 1 and request["elicitationId"] not in far_ids  # each hop owns its ids
    assert text == "Provisioned orders in eu-west-1."


def test_declining_here_is_declining_there(hubs: tuple[RunningHub, RunningHub]) -> None:
    near, _ = hubs

    def decline(event: dict[str, Any], conversation_id: str) -> None:
        assert near.answer("alice", conversation_id, event["elicitationId"], "decline").status_code == 200

    text, _ = converse(near, call_far(PROVISION), decline)
    # Far's tool heard the decline (not a cancelled task), and far's agent said so; near passes its words on.
    assert text == "Tool error: Provisioning of orders stopped: the user chose decline."
