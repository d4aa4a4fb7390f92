"""Durable pauses: questions outlive the stream, a kill -9 and a restart, and every tool call completes once."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import USERS, HubFactory, McpProcess, RunningHub, sse_data, sse_numbered
from tests.core_fixtures import PostgresServer, RedisServer
from tests.models.script import Hang, Text, ToolCall
from tests.models.standins import ModelStandIn
from tests.server.test_scale_out import ServedHub

N = 100
ALICE = {"authorization": "Bearer alice-secret", "x-supports-elicitation": "true"}


Serve = Callable[..., ServedHub]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Start `elicithub serve` processes; whatever happens in the test, none outlives it."""
    started: list[ServedHub] = []

    def start(config: Path, name: str, instance: str | None = None) -> ServedHub:
        hub = ServedHub(config, tmp_path / f"{name}.log", instance=instance)
        started.append(hub)
        hub.wait()
        return hub

    yield start
    for hub in started:
        if hub.process.poll() is None:
            hub.process.kill()
            hub.process.wait()


def write_config(workdir: Path, store_url: str, legacy: McpProcess, mrtr: McpProcess, **extra: Any) -> Path:
    config = workdir / "hub.yaml"
    data = {
        "store": {"url": store_url, "heartbeat_s": 0.3},
        "secrets": {"key_file": str(workdir / "secret.key")},
        "users": USERS,
        "mcp_servers": [
            {"id": "legacy", "url": legacy.url, "protocol": "legacy"},
            {"id": "mrtr", "url": mrtr.url},
        ],
        **extra,
    }
    config.write_text(json.dumps(data))
    return config


def store_url(store: str, tmp_path: Path, request: pytest.FixtureRequest, db: int) -> str:
    """A fresh store: a SQLite file, an emptied database of the session's redis-server, or a new database of the
    session's PostgreSQL cluster."""
    if store == "sqlite":
        return f"sqlite:///{tmp_path / 'hub.db'}"
    if store == "postgres":
        postgres_server: PostgresServer = request.getfixturevalue("postgres_server")
        return postgres_server.fresh(f"durable_{db}")
    redis_server: RedisServer = request.getfixturevalue("redis_server")
    with redis_server.client(db) as client:
        client.flushdb()
    return redis_server.url(db)


def ui_body(conversation_id: str, part: dict[str, Any]) -> dict[str, Any]:
    return {"id": conversation_id, "messages": [{"id": "m1", "role": "user", "parts": [part]}]}


async def raise_questions(url: str, tag: str, n: int) -> list[dict[str, str]]:
    """Start n chats (half 2026-07-28, half 2025-11-25), read each until its question, then hang up."""

    async def one(client: httpx.AsyncClient, i: int) -> dict[str, str]:
        server = "mrtr" if i % 2 == 0 else "legacy"
        name = f"{tag}-{i}"
        conversation = f"conv-{tag}-{i}"
        text = f'/call {server}.provision {{"name": "{name}"}}'
        async with client.stream(
            "POST", "/run/api/chat", json=ui_body(conversation, {"type": "text", "text": text})
        ) as r:
            async for line in r.aiter_lines():
                if '"data-elicitation-request"' in line:
                    event = json.loads(line.removeprefix("data: "))["data"]
                    return {"conversation": conversation, "elicitation": event["elicitationId"], "name": name}
        raise AssertionError(f"no question in {conversation}")

    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(base_url=url, headers=ALICE, timeout=60, limits=limits) as client:
        return list(await asyncio.gather(*(one(client, i) for i in range(n))))


async def answer_all(url: str, asked: list[dict[str, str]]) -> list[int]:
    async with httpx.AsyncClient(base_url=url, headers=ALICE, timeout=60) as client:

        async def one(q: dict[str, str]) -> int:
            body = {
                "conversationId": q["conversation"],
                "elicitationId": q["elicitation"],
                "action": "accept",
                "content": {"region": "eu-west-1"},
            }
            return (await client.post("/run/api/elicitation-responses", json=body)).status_code

        return list(await asyncio.gather(*(one(q) for q in asked)))


def reattached_text(url: str, conversation: str, deadline_s: float = 180) -> str:
    """The conversation's last answer, once its run has finished (it may still be resuming)."""
    end = time.monotonic() + deadline_s
    while True:
        with httpx.Client(base_url=url, headers=ALICE, timeout=30) as client:
            response = client.get(f"/run/api/conversations/{conversation}")
            assert response.status_code == 200, response.read()
            messages = response.json()["messages"]
            with client.stream("GET", f"/run/api/conversations/{conversation}/stream") as running:
                finished = running.status_code == 204
        if (finished and messages and messages[-1]["role"] == "assistant") or time.monotonic() > end:
            return str(messages[-1]["text"]) if messages else ""
        time.sleep(0.2)


def provisioned(*servers: McpProcess) -> dict[str, int]:
    counts: dict[str, int] = {}
    for server in servers:
        for name, count in httpx.get(server.url.removesuffix("/mcp") + "/debug/provisioned").json().items():
            counts[name] = counts.get(name, 0) + count
    return counts


def check_all_completed_once(url: str, asked: list[dict[str, str]], legacy: McpProcess, mrtr: McpProcess) -> None:
    for q in asked:
        assert reattached_text(url, q["conversation"]) == f"Provisioned {q['name']} in eu-west-1.", q
    counts = provisioned(legacy, mrtr)
    assert {q["name"]: counts.get(q["name"], 0) for q in asked} == {q["name"]: 1 for q in asked}


@pytest.mark.timeout(400)  # a hundred runs resumed after a restart
@pytest.mark.parametrize("store", ["sqlite", "redis", "postgres"])
def test_kill_9_with_100_pending_then_restart_and_answer_all(
    store: str,
    serve: Serve,
    tmp_path: Path,
    legacy_server: McpProcess,
    mrtr_server: McpProcess,
    request: pytest.FixtureRequest,
) -> None:
    url = store_url(store, tmp_path, request, db=2)
    config = write_config(tmp_path, url, legacy_server, mrtr_server)
    first = serve(config, "first")
    asked = asyncio.run(raise_questions(first.url, f"k9{store}", N))
    assert len({q["elicitation"] for q in asked}) == N
    first.process.kill()  # SIGKILL: no shutdown, nothing cancelled
    first.process.wait()

    second = serve(config, "second")
    try:
        # What was open is still open: the reloaded page's view of a conversation shows it.
        with httpx.Client(base_url=second.url, headers=ALICE) as client:
            view = client.get(f"/run/api/conversations/{asked[0]['conversation']}").json()
        assert view["messages"][0]["text"].startswith("/call mrtr.provision")
        statuses = asyncio.run(answer_all(second.url, asked))
        assert statuses == [200] * N
        check_all_completed_once(second.url, asked, legacy_server, mrtr_server)
    finally:
        second.stop()


@pytest.mark.timeout(400)  # ten runs taken over and resumed: minutes on a machine busy with other work
@pytest.mark.parametrize("store", ["redis", "postgres"])
def test_a_surviving_instance_takes_over_the_runs_of_one_that_died(
    store: str,
    serve: Serve,
    tmp_path: Path,
    legacy_server: McpProcess,
    mrtr_server: McpProcess,
    request: pytest.FixtureRequest,
) -> None:
    config = write_config(tmp_path, store_url(store, tmp_path, request, db=3), legacy_server, mrtr_server)
    a, b = serve(config, "a"), serve(config, "b")
    try:
        asked = asyncio.run(raise_questions(a.url, f"takeover{store}", 10))
        a.process.kill()
        a.process.wait()
        assert asyncio.run(answer_all(b.url, asked)) == [200] * 10
        check_all_completed_once(b.url, asked, legacy_server, mrtr_server)
    finally:
        b.stop()


@pytest.mark.parametrize(
    ("stop", "store"), [("kill", "sqlite"), ("terminate", "sqlite"), ("kill", "redis"), ("kill", "postgres")]
)
def test_after_a_restart_the_fast_path_streams_the_continuation(
    stop: str,
    store: str,
    serve: Serve,
    tmp_path: Path,
    legacy_server: McpProcess,
    mrtr_server: McpProcess,
    request: pytest.FixtureRequest,
) -> None:
    url = store_url(store, tmp_path, request, db=4)
    # Beats so slow that no takeover could come in time: the restarted hub continues its runs because they are
    # its own (the same instance name), as it starts.
    config = write_config(tmp_path, url, legacy_server, mrtr_server, store={"url": url, "heartbeat_s": 30})
    first = serve(config, "first", instance="hub-restarted")
    asked = asyncio.run(raise_questions(first.url, f"fast{stop}{store}", 2))
    getattr(first.process, stop)()  # SIGKILL, or SIGTERM: a graceful shutdown keeps the questions open too
    first.process.wait(timeout=20)
    second = serve(config, "second", instance="hub-restarted")
    try:
        for q in asked:  # one 2026-07-28 call (retried with its requestState), one 2025-11-25 call (run again)
            part = {
                "type": "elicitation-response",
                "elicitationId": q["elicitation"],
                "action": "accept",
                "content": {"region": "eu-west-1"},
            }
            with httpx.Client(base_url=second.url, headers=ALICE, timeout=60) as client:
                with client.stream("POST", "/run/api/chat", json=ui_body(q["conversation"], part)) as response:
                    parts = list(sse_data(response))
            text = "".join(p.get("delta", "") for p in parts if p["type"] == "text-delta")
            assert text == f"Provisioned {q['name']} in eu-west-1."
            resolved = [p for p in parts if p["type"] == "data-elicitation-resolved"]
            assert [p["id"] for p in resolved] == [q["elicitation"]], parts
        assert all(provisioned(legacy_server, mrtr_server)[q["name"]] == 1 for q in asked)
    finally:
        second.stop()


def test_reattach_replays_the_run_and_resumes_after_last_event_id(hub: RunningHub) -> None:
    asked = asyncio.run(raise_questions(hub.url, "reattach", 1))[0]
    path = f"/run/api/conversations/{asked['conversation']}/stream"
    with httpx.Client(base_url=hub.url, headers=ALICE, timeout=30) as client:
        # Back with no id: the paused run from its start, up to its question; then the client goes away again.
        with client.stream("GET", path) as response:
            seen = []
            for numbered in sse_numbered(response):
                seen.append(numbered)
                if numbered[1]["type"] == "data-elicitation-request":
                    break
        assert seen[0][1]["type"] == "start" and seen[-1][1]["id"] == asked["elicitation"]
        question_id = seen[-1][0]
        before_question = next(i for i, _ in reversed(seen) if i and i != question_id)  # an event writes 1+ parts
        # Back after the event before the question while the run waits: the question, then the continuation.
        with client.stream("GET", path, headers={"last-event-id": before_question}) as response:
            parts = sse_numbered(response)
            resumed = []
            for numbered in parts:
                resumed.append(numbered)
                if numbered[1]["type"] == "data-elicitation-request":
                    break
            assert resumed[0][1]["type"] == "start" and resumed[-1] == seen[-1]
            assert {i for i, _ in resumed[1:]} == {question_id}
            answered = hub.answer(
                "alice", asked["conversation"], asked["elicitation"], "accept", {"region": "us-east-1"}
            )
            assert answered.status_code == 200
            followed = list(parts)
        assert followed[-1][1]["type"] == "finish"  # and so the run has finished
        # Back after the question once the run has finished: the rest of it is replayed through its finish.
        with client.stream("GET", path, headers={"last-event-id": question_id}) as response:
            assert response.status_code == 200
            replayed = list(sse_numbered(response))
        # The same parts under the same ids, but for the step a stream that starts mid-step opens first, and for the
        # model's text: followed live it is numbered inside its turn (RUN:SEQ:TEXT.THINKING), read back by the turn's
        # end on the log.
        assert without_text_ids(replayed[1:]) == without_text_ids(
            [*followed[:1], (followed[1][0], {"type": "start-step"}), *followed[1:]]
        )
        types = [p["type"] for _, p in replayed]
        assert "data-elicitation-request" not in types  # already seen: not sent again
        assert types[0] == "start" and types[-1] == "finish" and "data-elicitation-resolved" in types
        text = "".join(p.get("delta", "") for _, p in replayed if p["type"] == "text-delta")
        assert text == f"Provisioned {asked['name']} in us-east-1."
        # Back after the finish: nothing follows, and no run is active.
        assert client.get(path, headers={"last-event-id": replayed[-1][0]}).status_code == 204
        # Another user cannot read it, even with its ids, and an unknown conversation does not exist.
        assert hub.client("bob").get(path, headers={"last-event-id": question_id}).status_code == 404
        assert client.get("/run/api/conversations/conv-nope/stream").status_code == 404


def without_text_ids(parts: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [("" if p["type"] in ("text-start", "text-delta") else i, p) for i, p in parts]


def test_reattaching_when_no_run_is_active_is_204_on_both_urls(make_hub: HubFactory) -> None:
    hub = make_hub()
    with httpx.Client(base_url=hub.url, headers=ALICE, timeout=30) as client:
        with client.stream("POST", "/run/api/chat", json=ui_body("conv-done", {"type": "text", "text": "hi"})) as r:
            assert any(p["type"] == "text-delta" and "Call a tool with" in p["delta"] for p in sse_data(r))
        # The AI SDK's resumeStream() on page load: nothing runs, so nothing is replayed (no duplicate message).
        assert client.get("/run/api/conversations/conv-done/stream").status_code == 204
        assert client.get("/run/api/chat/conv-done/stream").status_code == 204
        assert client.get("/run/api/chat/conv-never/stream").status_code == 404


def test_a_fast_path_answer_leaves_the_continuation_to_a_reattached_reader(hub: RunningHub) -> None:
    asked = asyncio.run(raise_questions(hub.url, "follower", 1))[0]
    follower = httpx.Client(base_url=hub.url, headers=ALICE, timeout=30)
    with follower.stream("GET", f"/run/api/conversations/{asked['conversation']}/stream") as following:
        lines = following.iter_lines()
        for line in lines:  # caught up: the open question has been replayed
            if '"data-elicitation-request"' in line:
                break
        part = {"type": "elicitation-response", "elicitationId": asked["elicitation"], "action": "accept"}
        part["content"] = {"region": "us-east-1"}
        with httpx.Client(base_url=hub.url, headers=ALICE, timeout=30) as client:
            with client.stream("POST", "/run/api/chat", json=ui_body(asked["conversation"], part)) as response:
                answered = [p["type"] for p in sse_data(response)]
        assert answered == ["start", "data-elicitation-resolved", "finish"]  # the continuation is not doubled here
        rest = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: {")]
    follower.close()
    text = "".join(p.get("delta", "") for p in rest if p["type"] == "text-delta")
    assert text == f"Provisioned {asked['name']} in us-east-1."


@pytest.mark.timeout(300)
@pytest.mark.parametrize("store", ["redis", "postgres"])
def test_a_model_turn_cut_by_a_crash_is_asked_again_where_the_run_resumes_and_no_call_is_made_twice(
    store: str,
    serve: Serve,
    tmp_path: Path,
    legacy_server: McpProcess,
    mrtr_server: McpProcess,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_KEY", "sk-crash-test")  # the hubs' processes inherit it
    name = f"crash-{store}"
    with ModelStandIn() as standin:
        model = {"id": "gpt", "provider": "openai", "model": "m", "base_url": standin.openai_base_url}
        models = [{**model, "api_key_env": "STANDIN_KEY"}]
        url = store_url(store, tmp_path, request, db=4)
        config = write_config(tmp_path, url, legacy_server, mrtr_server, models=models, model="gpt")
        a, b = serve(config, "a"), serve(config, "b")
        standin.reply(ToolCall("mrtr__provision", {"name": name}))
        hang = Hang()
        standin.reply(Text("Provisioned "), hang)  # the turn after the call: the hub dies in it
        standin.reply(Text(f"Provisioned {name} in eu-west-1."))
        conversation = f"conv-{name}"
        with httpx.Client(base_url=a.url, headers=ALICE, timeout=60) as client:
            with client.stream(
                "POST", "/run/api/chat", json=ui_body(conversation, {"type": "text", "text": "go"})
            ) as r:
                asked = next(p for p in sse_data(r) if p["type"] == "data-elicitation-request")
            body = {"conversationId": conversation, "elicitationId": asked["id"], "action": "accept"}
            answered = client.post("/run/api/elicitation-responses", json={**body, "content": {"region": "eu-west-1"}})
            assert answered.status_code == 200, answered.text
        hang.reached.wait()
        a.process.kill()  # mid-turn: the model had said "Provisioned " when the hub died
        a.process.wait()
        try:
            assert reattached_text(b.url, conversation) == f"Provisioned {name} in eu-west-1."
            assert provisioned(mrtr_server).get(name) == 1  # the call the run made before the crash: not again
            assert len(standin.requests) == 3  # the cut turn was asked again, once
        finally:
            b.stop()
