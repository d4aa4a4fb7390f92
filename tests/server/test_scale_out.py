"""Two `elicithub serve` processes sharing one store (Redis, then Postgres): a question raised on one is answered on
the other."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as mt
import pytest
import yaml
from mcp.shared.exceptions import MCPError

from elicithub.core.broker import Broker
from elicithub.core.elicitation import utcnow
from elicithub.core.events import ElicitationRequested, ElicitationResolved
from elicithub.core.waiting import Resolution
from elicithub.store import open_backend
from tests.conftest import USERS, HubAddress, McpProcess, free_port, sse_data, sse_numbered
from tests.core_fixtures import DEADLINE_S, BusSink, PostgresServer, RedisServer, question

DB = 1  # the store tests empty database 0 for every test
ADMIN = {"id": "carol", "token": "carol-secret"}


class ServedHub(HubAddress):
    """`elicithub serve --config FILE` in its own process; SIGTERM stops it at once unless the config asks for a
    drain (`server.drain_s`, whose default is for production)."""

    def __init__(self, config: Path, log: Path, port: int | None = None, instance: str | None = None) -> None:
        super().__init__(port or free_port())
        self.log = log
        self._env = {**os.environ, "ELICITHUB_INSTANCE": instance} if instance is not None else None
        self._pinned = port is not None
        settings = yaml.safe_load(config.read_text()) or {}
        settings.setdefault("server", {}).setdefault("drain_s", 0)
        self._config = log.with_suffix(".yaml")
        self._config.write_text(json.dumps(settings))
        self.process = self._launch()

    def _launch(self) -> subprocess.Popen[bytes]:
        serve = ["serve", "--config", str(self._config), "--port", str(self.port)]
        command = [sys.executable, "-c", "from elicithub.cli import main; main()", *serve]
        with self.log.open("wb") as out:
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=self._env)

    def wait(self) -> None:
        """Until this hub's own process listens (uvicorn runs the hub's startup, which subscribes to the store,
        before it does). Its log says so: a connection alone could reach another test's process that took the port
        meanwhile. A port taken before the hub bound it is given up for a free one, unless the test pinned it."""
        listening = f"Uvicorn running on http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 90
        while listening not in self.log.read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the hub did not start within 90 s:\n{self.log.read_text(errors='replace')}")
            if self.process.poll() is not None:
                said = self.log.read_text(errors="replace")
                if "address already in use" in said and not self._pinned:
                    self.port = free_port()
                    self.url = f"http://127.0.0.1:{self.port}"
                    self.process = self._launch()
                    self.wait()
                    return
                raise RuntimeError(f"the hub did not start:\n{said}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module", params=["redis", "postgres"])
def shared_store_url(request: pytest.FixtureRequest) -> str:
    """An empty shared store for this module's hubs: a Redis database, or a Postgres database of its own."""
    if request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        with redis_server.client(DB) as client:
            client.flushdb()
        return redis_server.url(DB)
    postgres_server: PostgresServer = request.getfixturevalue("postgres_server")
    return postgres_server.fresh("scale_out")


@pytest.fixture(scope="module")
def hubs(
    shared_store_url: str, legacy_server: McpProcess, mrtr_server: McpProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServedHub, ServedHub]]:
    workdir = tmp_path_factory.mktemp("scale-out")
    config = workdir / "hub.yaml"
    config.write_text(
        json.dumps(
            {
                "store": {"url": shared_store_url},
                "secrets": {"key_file": str(workdir / "secret.key")},
                "users": [*USERS, ADMIN],
                "admins": [ADMIN["id"]],
                "elicitation": {"timeout_s": 60},
                "mcp_servers": [
                    {"id": "legacy", "url": legacy_server.url, "protocol": "legacy"},
                    {"id": "mrtr", "url": mrtr_server.url},
                ],
                # Only mrtr.later needs an approval (its requester's), which AI SDK 6 clients answer natively.
                "approvals": [{"tools": ["mrtr.later"], "approvers": "requester"}],
                "ui_stream": {"native_approvals": True},
            }
        )
    )
    a, b = ServedHub(config, workdir / "a.log"), ServedHub(config, workdir / "b.log")
    try:
        a.wait()
        b.wait()
        yield a, b
    finally:
        a.stop()
        b.stop()


def items(response: httpx.Response) -> Iterator[str | dict[str, Any]]:
    """An OpenAI-compatible stream's text pieces as strings, its elicitation events as dicts."""
    for chunk in sse_data(response):
        content = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
        if content and content.startswith('{"type": "elicitation-'):
            yield json.loads(content)
        elif content:
            yield content


def chat_body(text: str) -> dict[str, Any]:
    return {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("server", ["mrtr", "legacy"])
def test_an_answer_posted_to_b_resumes_the_run_streaming_on_a(hubs: tuple[ServedHub, ServedHub], server: str) -> None:
    a, b = hubs
    body = chat_body(f'/call {server}.provision {{"name": "orders"}}')
    with a.client() as client, client.stream("POST", "/run/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        conversation = response.headers["x-conversation-id"]
        stream = items(response)
        request = next(stream)
        assert isinstance(request, dict) and request["type"] == "elicitation-request"
        eid = request["elicitationId"]

        answered = b.answer("alice", conversation, eid, "accept", {"region": "eu-west-1"})
        assert answered.status_code == 200, answered.text
        assert answered.json() == {"elicitationId": eid, "outcome": "accepted"}

        rest = list(stream)
    assert rest[0] == {"type": "elicitation-resolved", "elicitationId": eid, "outcome": "accepted"}
    assert [i for i in rest if isinstance(i, dict)] == [rest[0]]  # announced once, on A
    assert "".join(i for i in rest if isinstance(i, str)) == "Provisioned orders in eu-west-1."

    # Both hubs judge later answers against the one stored outcome.
    for hub in (a, b):
        again = hub.answer("alice", conversation, eid, "accept", {"region": "eu-west-1"})
        assert again.status_code == 200 and again.json() == {"elicitationId": eid, "outcome": "accepted"}
        other = hub.answer("alice", conversation, eid, "accept", {"region": "us-east-1"})
        assert other.status_code == 409 and other.json()["error"]["code"] == "already_resolved"
        assert hub.answer("alice", conversation, eid, "decline").status_code == 409
    # To anyone else, or under another id, it does not exist on either hub.
    for hub in (a, b):
        assert hub.answer("bob", conversation, eid, "accept", {"region": "eu-west-1"}).status_code == 404
        unknown = hub.answer("alice", conversation, "eli_unknown", "decline")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


def test_an_answer_sent_as_a_chat_message_to_b_resumes_the_run_on_a(hubs: tuple[ServedHub, ServedHub]) -> None:
    a, b = hubs
    with (
        a.client() as client,
        client.stream(
            "POST", "/run/v1/chat/completions", json=chat_body('/call mrtr.provision {"name": "billing"}')
        ) as response,
    ):
        conversation = response.headers["x-conversation-id"]
        stream = items(response)
        request = next(stream)
        assert isinstance(request, dict)
        part = {"type": "elicitation-response", "elicitationId": request["elicitationId"], "action": "decline"}
        message = {"id": conversation, "messages": [{"role": "user", "parts": [part]}]}
        with b.client() as other, other.stream("POST", "/run/api/chat", json=message) as on_b:
            parts = [p for p in sse_data(on_b)]
        rest = list(stream)
    # A's run goes on, and B's response carries the continuation too: no reader on B follows that run.
    resolved = {"type": "elicitation-resolved", "elicitationId": request["elicitationId"], "outcome": "declined"}
    expected = "Tool error: Provisioning of billing stopped: the user chose decline."
    assert [p.get("data") for p in parts if p["type"] == "data-elicitation-resolved"] == [resolved]
    assert "".join(p.get("delta", "") for p in parts if p["type"] == "text-delta") == expected
    assert parts[-1]["type"] == "finish"
    assert rest[0] == resolved
    assert "".join(i for i in rest if isinstance(i, str)) == expected


def test_a_tab_reloaded_onto_b_sees_the_question_and_the_result(hubs: tuple[ServedHub, ServedHub]) -> None:
    a, b = hubs
    body = chat_body('/call mrtr.provision {"name": "reload"}')
    with a.client() as client, client.stream("POST", "/run/v1/chat/completions", json=body) as response:
        conversation = response.headers["x-conversation-id"]
        request = next(items(response))
    # The tab went away with A's stream; it comes back on B.
    assert isinstance(request, dict)
    with b.client() as other:
        shown = other.get(f"/run/api/conversations/{conversation}").json()
        assert [e["elicitationId"] for e in shown["pending"]] == [request["elicitationId"]]
        with other.stream("GET", f"/run/api/conversations/{conversation}/stream") as following:
            assert following.status_code == 200
            parts = sse_data(following)
            seen = []
            for part in parts:
                seen.append(part)
                if part["type"] == "data-elicitation-request":
                    break
            assert seen[0]["type"] == "start" and seen[-1]["id"] == request["elicitationId"]
            answered = a.answer("alice", conversation, request["elicitationId"], "accept", {"region": "us-east-1"})
            assert answered.status_code == 200
            rest = list(parts)
    assert "".join(p.get("delta", "") for p in rest if p["type"] == "text-delta") == "Provisioned reload in us-east-1."
    assert rest[-1]["type"] == "finish"
    with b.client() as other:
        assert other.get(f"/run/api/chat/{conversation}/stream").status_code == 204  # nothing runs any more
        assert other.get(f"/run/api/conversations/{conversation}").json()["messages"][-1] == {
            "role": "assistant",
            "text": "Provisioned reload in us-east-1.",
        }


def without_text_ids(parts: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [("" if p["type"] in ("text-start", "text-delta") else i, p) for i, p in parts]


def test_a_tab_back_on_b_after_the_run_finished_on_a_gets_the_rest_after_its_last_event(
    hubs: tuple[ServedHub, ServedHub],
) -> None:
    a, b = hubs
    text = '/call mrtr.provision {"name": "back"}'
    body = {"id": "conv-back-on-b", "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}]}
    with a.client() as client, client.stream("POST", "/run/api/chat", json=body) as response:
        parts = sse_numbered(response)
        question_id, question = next(p for p in parts if p[1]["type"] == "data-elicitation-request")
        assert a.answer("alice", "conv-back-on-b", question["id"], "accept", {"region": "eu-west-1"}).status_code == 200
        on_a = list(parts)  # read through its finish: the run is over before the tab comes back
    # The tab had read up to the question when its connection broke; it comes back on B with that event's id.
    path = "/run/api/chat/conv-back-on-b/stream"
    with b.client() as other, other.stream("GET", path, headers={"last-event-id": question_id}) as back:
        assert back.status_code == 200
        replayed = list(sse_numbered(back))
    assert replayed[0][1] == {"type": "start", "messageId": question_id.rsplit(":", 1)[0]}
    # The same parts under the same ids, but for the step a stream that starts mid-step opens first.
    # The model's text followed live is numbered inside its turn; read back, by the turn's end on the log.
    assert without_text_ids(replayed[1:]) == without_text_ids(
        [*on_a[:1], (on_a[1][0], {"type": "start-step"}), *on_a[1:]]
    )
    assert (
        "".join(p.get("delta", "") for _, p in replayed if p["type"] == "text-delta")
        == "Provisioned back in eu-west-1."
    )
    assert replayed[-1][1]["type"] == "finish"
    with b.client() as other:
        assert other.get(path, headers={"last-event-id": replayed[-1][0]}).status_code == 204


def test_a_native_approval_asked_on_a_is_answered_on_b_which_streams_the_rest(
    hubs: tuple[ServedHub, ServedHub], mrtr_server: McpProcess, shared_store_url: str
) -> None:
    a, b = hubs
    name = f"native-{shared_store_url.split(':')[0]}"
    called = mrtr_server.url.removesuffix("/mcp") + "/debug/called"
    text = f'/call mrtr.later {{"name": "{name}"}}'
    body = {"id": name, "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}]}
    with a.client() as client, client.stream("POST", "/run/api/chat", json=body) as response:
        on_a = list(sse_data(response))  # it ends at the approval request: the call waits for the next request
    request = next(p for p in on_a if p["type"] == "tool-approval-request")
    assert on_a[-1]["type"] == "finish" and httpx.get(called).json().get(f"later:{name}") is None
    tool = {
        "type": "dynamic-tool",
        "toolName": "mrtr.later",
        "toolCallId": request["toolCallId"],
        "state": "approval-responded",
        "input": {"name": name},
        "approval": {"id": request["approvalId"], "approved": True},
    }
    body["messages"].append({"id": on_a[0]["messageId"], "role": "assistant", "parts": [tool]})
    with b.client("bob") as other:
        assert other.post("/run/api/chat", json={**body, "id": name}).status_code == 404  # not bob's
    with b.client() as other, other.stream("POST", "/run/api/chat", json=body) as response:
        assert response.status_code == 200
        on_b = list(sse_data(response))
    assert on_b[0] == {"type": "start", "messageId": on_a[0]["messageId"]}
    output = next(p for p in on_b if p["type"] == "tool-output-available")
    assert output["toolCallId"] == request["toolCallId"] and output["output"] == "Done after waiting."
    assert httpx.get(called).json()[f"later:{name}"] == 2  # one call: its first round, and the round after waiting


def test_a_message_on_b_supersedes_the_run_waiting_on_a(hubs: tuple[ServedHub, ServedHub]) -> None:
    a, b = hubs
    body = {"id": "conv-moved-on", "messages": [{"role": "user", "parts": [{"type": "text", "text": ""}]}]}
    body["messages"][0]["parts"][0]["text"] = '/call mrtr.provision {"name": "first"}'
    with a.client() as client, client.stream("POST", "/run/api/chat", json=body) as first:
        parts = sse_data(first)
        request = next(p for p in parts if p["type"] == "data-elicitation-request")
        body["messages"][0]["parts"][0]["text"] = '/call legacy.echo {"text": "second"}'
        with b.client() as other, other.stream("POST", "/run/api/chat", json=body) as second:
            assert second.status_code == 200
            second_parts = list(sse_data(second))
        old_rest = list(parts)
    assert "".join(p.get("delta", "") for p in second_parts if p["type"] == "text-delta") == "echo: second"
    cancelled = {"type": "elicitation-resolved", "elicitationId": request["id"], "outcome": "cancelled"}
    assert [p["data"] for p in old_rest if p["type"] == "data-elicitation-resolved"] == [cancelled]
    assert old_rest[-1]["type"] == "finish"


def test_an_admin_on_b_cancels_a_question_asked_on_a_and_the_run_on_a_goes_on(
    hubs: tuple[ServedHub, ServedHub],
) -> None:
    a, b = hubs
    body = chat_body('/call mrtr.provision {"name": "audit"}')
    with a.client() as client, client.stream("POST", "/run/v1/chat/completions", json=body) as response:
        stream = items(response)
        request = next(stream)
        assert isinstance(request, dict)
        eid = request["elicitationId"]
        with httpx.Client(base_url=b.url, headers={"authorization": f"Bearer {ADMIN['token']}"}) as admin:
            listed = admin.get("/run/api/admin/questions", params={"user": "alice"}).json()["questions"]
            assert eid in [row["elicitationId"] for row in listed]
            cancelled = admin.post(f"/run/api/admin/questions/{eid}/cancel")
            assert cancelled.status_code == 200 and cancelled.json() == {"elicitationId": eid, "outcome": "cancelled"}
        rest = list(stream)
    assert rest[0] == {"type": "elicitation-resolved", "elicitationId": eid, "outcome": "cancelled"}
    assert (
        "".join(i for i in rest if isinstance(i, str))
        == "Tool error: Provisioning of audit stopped: the user chose cancel."
    )
    with httpx.Client(base_url=a.url, headers={"authorization": f"Bearer {ADMIN['token']}"}) as admin:
        assert admin.post(f"/run/api/admin/questions/{eid}/cancel").status_code == 409


@contextlib.asynccontextmanager
async def waiting_broker(store_url: str) -> AsyncIterator[Broker]:
    """A third process's view: a broker on the same store, whose run waits here in the test."""
    backend = open_backend(store_url)
    broker = Broker(backend.elicitations, BusSink())
    await broker.start()
    try:
        yield broker
    finally:
        await broker.close()
        await backend.close()


async def wait_on(broker: Broker, timeout_s: float) -> tuple[asyncio.Task[Resolution], str, str]:
    e = question(timeout_s, conversation_id="conv_scale", message="How many replicas?")
    async with broker.events.bus.subscribe(e.run_id) as queue:
        task = asyncio.create_task(broker.request(e))
        with anyio.fail_after(DEADLINE_S):
            assert await queue.get() == ElicitationRequested(e)
    return task, e.id, e.run_id


def answer_body(eid: str, content: dict[str, Any] | None = None, action: str = "accept") -> dict[str, Any]:
    return {"conversationId": "conv_scale", "elicitationId": eid, "action": action, "content": content}


def clients(hubs: tuple[ServedHub, ServedHub]) -> tuple[httpx.AsyncClient, httpx.AsyncClient]:
    auth = {"authorization": "Bearer alice-secret"}
    return httpx.AsyncClient(base_url=hubs[0].url, headers=auth), httpx.AsyncClient(base_url=hubs[1].url, headers=auth)


# The tests below hold a waiter in this process and run their own event loop (asyncio.run). Under the anyio pytest
# plugin the suite hung now and then at the teardown of the last of them: the plugin's runner task did not end when
# its loop was closed, and it swallows pytest-timeout's failure, so nothing stopped the session.


def test_fifty_concurrent_different_answers_across_both_hubs_have_one_winner(
    hubs: tuple[ServedHub, ServedHub], shared_store_url: str
) -> None:
    async def scenario() -> None:
        answers = [{"region": "eu", "replicas": n} for n in range(1, 51)]
        a, b = clients(hubs)
        async with waiting_broker(shared_store_url) as broker, a, b:
            task, eid, stream_id = await wait_on(broker, 60)
            async with broker.events.bus.subscribe(stream_id) as queue:
                with anyio.fail_after(30):
                    responses = await asyncio.gather(
                        *(
                            (a, b)[n % 2].post("/run/api/elicitation-responses", json=answer_body(eid, content))
                            for n, content in enumerate(answers)
                        )
                    )
                    waited = await task
                assert queue.get_nowait() == ElicitationResolved(eid, "accepted") and queue.empty()
        statuses = [r.status_code for r in responses]
        assert statuses.count(200) == 1 and statuses.count(409) == 49, statuses
        winner = answers[statuses.index(200)]
        assert responses[statuses.index(200)].json() == {"elicitationId": eid, "outcome": "accepted"}
        assert waited == Resolution(eid, "accepted", winner)

    asyncio.run(scenario())


@pytest.mark.parametrize("offset_ms", [-20, -12, -8, -4])
def test_answers_on_both_hubs_racing_the_deadline_end_in_one_state(
    hubs: tuple[ServedHub, ServedHub], shared_store_url: str, offset_ms: int
) -> None:
    async def scenario() -> None:
        a, b = clients(hubs)
        async with waiting_broker(shared_store_url) as broker, a, b:
            await a.get("/healthz")  # connect before the race
            await b.get("/healthz")
            task, eid, stream_id = await wait_on(broker, 0.3)
            e = await broker.lookup(eid, "alice")
            async with broker.events.bus.subscribe(stream_id) as queue:
                # An answer takes a few ms to reach a hub: aim its arrival around the deadline.
                await anyio.sleep(max((e.expires_at - utcnow()).total_seconds() + offset_ms / 1000, 0))
                body = answer_body(eid, {"region": "us", "replicas": 1})
                with anyio.fail_after(10):
                    responses = await asyncio.gather(
                        *(hub.post("/run/api/elicitation-responses", json=body) for hub in (a, b))
                    )
                    waited = await task
                assert queue.get_nowait() == ElicitationResolved(eid, waited.outcome) and queue.empty()
            stored = await broker.store.get(eid)
        assert stored is not None and stored.outcome == waited.outcome
        statuses = sorted(r.status_code for r in responses)
        if waited.outcome == "accepted":
            assert statuses == [200, 200]  # the same answer twice: the second is the idempotent repeat
            assert waited == Resolution(eid, "accepted", {"region": "us", "replicas": 1})
        else:
            assert waited == Resolution(eid, "expired", None)
            assert statuses == [410, 410]

    asyncio.run(scenario())


def test_an_mcp_retry_taken_by_the_other_hub_continues_the_run(hubs: tuple[ServedHub, ServedHub]) -> None:
    from tests.surfaces.mcp.test_server import connected, retry, text

    a, b = hubs

    async def go() -> None:
        arguments = {"message": '/call mrtr.provision {"name": "crossed"}'}
        async with connected(a, "2026-07-28") as (on_a, _), connected(b, "2026-07-28") as (on_b, _):
            first = await retry(on_a, arguments, None)
            assert isinstance(first, mt.InputRequiredResult)
            [key] = list(first.input_requests or {})
            answer = {key: mt.ElicitResult(action="accept", content={"region": "us-east-1"})}
            done = await retry(on_b, arguments, first.request_state, answer)
            assert isinstance(done, mt.CallToolResult) and text(done) == "Provisioned crossed in us-east-1."
            with pytest.raises(MCPError, match="already used"):  # used up on both hubs
                await retry(on_a, arguments, first.request_state, answer)

    asyncio.run(go())
