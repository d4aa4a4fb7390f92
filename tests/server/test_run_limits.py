"""The limits on what a caller may start (per user, counted in the store across hubs) and on what a hub holds, through
the chat endpoints, /mcp and /a2a: refused with Retry-After, and never in the way of an answer to an open question.
Runs are held open on their questions (the scripted model calling a tool that asks), never by time."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from a2a.helpers import get_data_parts
from a2a.types import TaskState
from a2a.utils.errors import InternalError
from ag_ui.core import RunErrorEvent
from mcp.shared.exceptions import MCPError

from tests.conftest import HubAddress, HubFactory, RunningHub, eventually, sse_data
from tests.surfaces.a2a.test_agent import a2a_client, message, task_of
from tests.surfaces.chat.agui_stream import run, run_input
from tests.surfaces.mcp.test_server import connected

PROVISION = '/call mrtr.provision {"name": "orders"}'
PROVISIONED = "Provisioned orders in eu-west-1."


def chat(client: httpx.Client, content: Any = "hello", conversation_id: str | None = None) -> httpx.Response:
    """A chat message on the OpenAI-compatible endpoint, its stream read to the end; the response (its `text`: what
    the stream said, events apart, or the error's body)."""
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": content}]}
    headers = {"x-conversation-id": conversation_id} if conversation_id else {}
    with client.stream("POST", "/run/v1/chat/completions", json=body, headers=headers) as response:
        if response.status_code != 200:
            response.read()
            return response
        said = [c["choices"][0]["delta"].get("content") or "" for c in sse_data(response) if c.get("choices")]
    response._content = "".join(s for s in said if not s.startswith('{"type": "elicitation-')).encode()
    return response


def asked(client: httpx.Client) -> tuple[str, str]:
    """A chat whose run asks a question and waits on it (the stream left): its conversation and question."""
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": PROVISION}]}
    with client.stream("POST", "/run/v1/chat/completions", json=body) as response:
        assert response.status_code == 200, response.read()
        for chunk in sse_data(response):
            content = chunk["choices"][0]["delta"].get("content") or "" if chunk.get("choices") else ""
            if content.startswith('{"type": "elicitation-request"'):
                return response.headers["x-conversation-id"], json.loads(content)["elicitationId"]
    raise AssertionError("the run asked no question")


def answered(client: httpx.Client, conversation_id: str, elicitation_id: str) -> httpx.Response:
    """The answer on the chat endpoint (its fast path), the continuation read to the run's end."""
    answer = {"type": "elicitation-response", "elicitationId": elicitation_id, "action": "accept"}
    return chat(client, json.dumps({**answer, "content": {"region": "eu-west-1"}}), conversation_id)


def refused(response: httpx.Response, status: int, code: str) -> str:
    """The refusal's message, once its status, code and Retry-After are checked; its Retry-After is returned too."""
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    return response.headers["retry-after"]


def limited(hub: HubAddress, limit: str) -> float:
    metrics = httpx.get(f"{hub.url}/metrics").text
    line = next((x for x in metrics.splitlines() if x.startswith(f'elicithub_limited_total{{limit="{limit}"}}')), None)
    return 0.0 if line is None else float(line.split()[-1])


def runs(hub: HubAddress) -> int:
    count: int = httpx.get(f"{hub.url}/healthz").json()["runs"]
    return count


def test_a_hub_at_max_active_runs_sheds_new_runs_stays_ready_and_takes_answers(make_hub: HubFactory) -> None:
    hub = make_hub(limits={"max_active_runs": 2})
    with hub.client("alice") as alice, hub.client("bob") as bob:
        questions = [asked(alice), asked(alice)]
        assert refused(chat(bob), 503, "overloaded") == "1"
        assert refused(chat(alice, PROVISION), 503, "overloaded") == "1"
        assert httpx.get(f"{hub.url}/readyz").status_code == 200
        assert limited(hub, "max_active_runs") == 2
        # The runs it holds go on: their answers get through, and they finish.
        for conversation_id, elicitation_id in questions:
            assert answered(alice, conversation_id, elicitation_id).text == PROVISIONED
        eventually(lambda: runs(hub) == 0, "the answered runs end")
        assert chat(bob).status_code == 200


def test_a_user_over_active_runs_gets_429_while_others_and_answers_go_through(make_hub: HubFactory) -> None:
    hub = make_hub(limits={"per_user": {"active_runs": 2}})
    with hub.client("alice") as alice, hub.client("bob") as bob:
        first, second = asked(alice), asked(alice)
        response = chat(alice)
        assert refused(response, 429, "rate_limited") == "5"
        assert "limits.per_user.active_runs" in response.json()["error"]["message"]
        assert chat(bob).status_code == 200
        assert hub.answer("alice", *first, "accept", {"region": "eu-west-1"}).status_code == 200
        assert answered(alice, *second).text == PROVISIONED  # its place is free once its end shows
        assert chat(alice).status_code == 200
    assert limited(hub, "active_runs") == 1


def test_a_user_over_requests_per_minute_gets_429_until_the_first_lapses_and_still_answers(
    make_hub: HubFactory,
) -> None:
    hub = make_hub(limits={"per_user": {"requests_per_minute": 2}})
    with hub.client("alice") as alice, hub.client("bob") as bob:
        question = asked(alice)
        assert chat(alice).status_code == 200
        retry_after = int(refused(chat(alice), 429, "rate_limited"))
        assert 1 <= retry_after <= 60
        assert refused(chat(alice, PROVISION), 429, "rate_limited")  # a refused request is not counted: still 2
        assert chat(bob).status_code == 200
        assert answered(alice, *question).text == PROVISIONED  # an answer starts no run: never limited
    assert limited(hub, "requests_per_minute") == 2


def test_a_user_with_as_many_questions_open_as_may_starts_no_run_until_one_is_answered(make_hub: HubFactory) -> None:
    hub = make_hub(limits={"per_user": {"pending_questions": 1}})
    with hub.client("alice") as alice:
        question = asked(alice)
        response = chat(alice)
        assert refused(response, 429, "rate_limited") == "30"
        assert "limits.per_user.pending_questions" in response.json()["error"]["message"]
        assert hub.answer("alice", *question, "accept", {"region": "eu-west-1"}).status_code == 200
        assert chat(alice).status_code == 200


def anonymous(hub: HubAddress, forwarded_for: str | None = None, client: httpx.Client | None = None) -> int:
    """An anonymous chat (a new caller, with no cookie, unless `client` keeps one); its status."""
    headers = {"x-forwarded-for": forwarded_for} if forwarded_for else {}
    own = client or httpx.Client(base_url=hub.url, timeout=30)
    try:
        body = {"id": "chat-1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
        with own.stream("POST", "/run/api/chat", json=body, headers=headers) as response:
            response.read()
        return response.status_code
    finally:
        if client is None:
            own.close()


def test_anonymous_callers_are_counted_by_address_and_x_forwarded_for_only_from_a_trusted_proxy(
    make_hub: HubFactory,
) -> None:
    # The test's requests come from 127.0.0.1, which is no proxy of this hub's: X-Forwarded-For is the caller's say.
    hub = make_hub(limits={"per_user": {"requests_per_minute": 2}}, server={"trusted_proxies": ["10.0.0.0/8"]})
    assert [anonymous(hub, f"203.0.113.{n}") for n in range(3)] == [200, 200, 429]
    assert limited(hub, "requests_per_minute") == 1


def test_behind_a_trusted_proxy_anonymous_callers_are_counted_by_forwarded_address_and_by_cookie(
    make_hub: HubFactory,
) -> None:
    hub = make_hub(limits={"per_user": {"requests_per_minute": 2}}, server={"trusted_proxies": ["127.0.0.1"]})
    # New callers each time (no cookie): counted by the address the proxy names.
    assert [anonymous(hub, "203.0.113.5") for _ in range(3)] == [200, 200, 429]
    assert anonymous(hub, "203.0.113.6") == 200
    # The proxy's own address and what the client wrote left of it count for nothing.
    assert anonymous(hub, "198.51.100.1, 203.0.113.7, 127.0.0.1") == 200
    assert anonymous(hub, "198.51.100.1, 203.0.113.7") == 200
    assert anonymous(hub, "198.51.100.2, 203.0.113.7") == 429
    # One caller (its cookie kept) from a new address each time: counted by its cookie from its second request on.
    with httpx.Client(base_url=hub.url, timeout=30) as browser:
        statuses = [anonymous(hub, f"192.0.2.{n}", browser) for n in range(4)]
    assert statuses == [200, 200, 200, 429]


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_the_limits_hold_across_hubs_sharing_a_store(
    make_hub: HubFactory, request: pytest.FixtureRequest, kind: str
) -> None:
    url = request.getfixturevalue(f"{kind}_url")
    limits = {"per_user": {"active_runs": 2, "requests_per_minute": 4}}
    one, two = make_hub(store={"url": url}, limits=limits), make_hub(store={"url": url}, limits=limits)
    with one.client("alice") as on_one, two.client("alice") as on_two:
        first = asked(on_one)
        asked(on_two)
        assert refused(chat(on_one), 429, "rate_limited") == "5"  # two runs going, one on each hub
        # Answered on the other hub: the run ends on the first, which lets its place go before its end shows.
        assert answered(on_two, *first).text == PROVISIONED
        assert chat(on_two).status_code == 200
        response = chat(on_one)  # the fifth request that would start a run this minute (a refused one counts)
        refused(response, 429, "rate_limited")
        assert "limits.per_user.requests_per_minute" in response.json()["error"]["message"]


def test_mcp_a2a_and_agui_callers_over_a_limit_get_their_protocols_refusal(make_hub: HubFactory) -> None:
    hub = make_hub(limits={"per_user": {"requests_per_minute": 1}})

    async def go() -> None:
        async with connected(hub, "2026-07-28") as (client, _):
            result = await client.call_tool("assistant", {"message": "hello"})
            assert not result.is_error
            with pytest.raises(MCPError) as caught:
                await client.call_tool("assistant", {"message": "hello"})
        error = caught.value.error
        assert error.code == -32000 and error.data is not None
        assert error.data["code"] == "rate_limited" and 1 <= error.data["retryAfter"] <= 60
        async with a2a_client(hub, "alice") as a2a:
            task = await task_of(a2a, message("hello"))
        assert task.status.state == TaskState.TASK_STATE_REJECTED
        [data] = get_data_parts(list(task.status.message.parts))
        assert data["error"]["code"] == "rate_limited" and data["error"]["retryAfter"] >= 1

    asyncio.run(go())
    [*_, error] = run(hub, run_input("thread-1", "hello"))
    assert isinstance(error, RunErrorEvent) and error.code == "rate_limited" and "Try again in" in error.message
    assert limited(hub, "requests_per_minute") == 3


def test_no_limit_is_on_by_default(hub: RunningHub) -> None:
    with hub.client("alice") as alice:
        for _ in range(5):
            asked(alice)
        assert chat(alice).status_code == 200


def test_an_overloaded_hub_refuses_new_runs_on_every_surface_and_answers_still_go_through(make_hub: HubFactory) -> None:
    hub = make_hub(limits={"max_active_runs": 1})
    with hub.client("alice") as alice:
        question = asked(alice)

        async def go() -> None:
            async with connected(hub, "2026-07-28") as (client, _):
                with pytest.raises(MCPError) as on_mcp:
                    await client.call_tool("assistant", {"message": "hello"})
            assert on_mcp.value.error.code == -32000
            assert on_mcp.value.error.data == {"code": "overloaded", "retryAfter": 1}
            async with a2a_client(hub, "alice") as a2a:  # refused before the SDK makes a task of it
                with pytest.raises(InternalError) as on_a2a:
                    await task_of(a2a, message("hello"))
            assert on_a2a.value.data == {"code": "overloaded", "retryAfter": 1}
            assert "limits.max_active_runs" in on_a2a.value.message

        asyncio.run(go())
        [*_, error] = run(hub, run_input("thread-1", "hello"))
        assert isinstance(error, RunErrorEvent) and error.code == "overloaded"
        assert answered(alice, *question).text == PROVISIONED
    assert limited(hub, "max_active_runs") == 3
