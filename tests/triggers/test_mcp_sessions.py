"""Kept downstream MCP sessions: one per server and credential, shared by concurrent calls, renewed when lost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from elicithub.config import McpServerConfig
from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer
from elicithub.core.events import RunPaused
from elicithub.runtime.asker import Asker
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.store import MemoryElicitations
from elicithub.triggers.http import CallAuth
from elicithub.triggers.mcp import McpShared, downstream_client, sessions
from elicithub.triggers.mcp.server import McpServerTrigger
from elicithub.triggers.mcp.transport import CONNECTION_FAILED, OneRequestFails
from tests.conftest import ServedInThread, free_port, served
from tests.core_fixtures import until
from tests.servers import standalone_server

pytestmark = pytest.mark.anyio


class Region(BaseModel):
    region: str = Field(json_schema_extra={"enum": ["us-east-1", "eu-west-1"]})


def mcp_app() -> ASGIApp:
    server = MCPServer("kept-sessions")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    @server.tool()
    async def provision(name: str, ctx: Context) -> str:
        """Asks which region."""
        answer = await ctx.elicit(f"Which region should {name} live in?", Region)
        return f"{name} in {answer.data.region}" if answer.action == "accept" else f"{name}: {answer.action}"

    return server.streamable_http_app()


@dataclass
class Seen:
    """What reached the server: each JSON-RPC request's method, session id and Authorization header."""

    requests: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    ended: list[str | None] = field(default_factory=list)
    """The session ids of the DELETE requests that ended a session, in order."""

    def methods(self) -> list[str]:
        return [m for m, _, _ in self.requests]


class Recording:
    """Records requests, and refuses the bearer token `bad` with a 401 as a protected server would."""

    def __init__(self, app: ASGIApp, seen: Seen) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            if scope["type"] == "http" and scope["method"] == "DELETE":
                headers = {k.decode(): v.decode() for k, v in scope["headers"]}
                self.seen.ended.append(headers.get("mcp-session-id"))
            await self.app(scope, receive, send)
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        method = json.loads(body).get("method") if body else None
        if method is not None:
            self.seen.requests.append((method, headers.get("mcp-session-id"), headers.get("authorization")))
        if _echoed(body) == CUT:
            # The response breaks off: its head and part of its JSON body, then the connection closes.
            head = [(b"content-type", b"application/json"), (b"content-length", b"100")]
            await send({"type": "http.response.start", "status": 200, "headers": head})
            await send({"type": "http.response.body", "body": b'{"jsonrpc": "2.0", ', "more_body": True})
            raise RuntimeError("the connection breaks off here, on purpose")
        if headers.get("authorization") == "Bearer bad":
            await send({"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": b""})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


CUT = "cut"
"""Echoing this, the test server's response breaks off mid-body."""


def _echoed(body: bytes) -> object:
    request = json.loads(body) if body else {}
    params = request.get("params") or {}
    return (params.get("arguments") or {}).get("text") if params.get("name") == "echo" else None


class Downstream:
    """The test server on a fixed port, in a thread; `restart()` brings up a new one there (its sessions lost)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.seen = Seen()
        self._start()

    def _start(self) -> None:
        # Kept sessions hold a stream open: a restart must not wait for the hub to close it.
        self.served = ServedInThread(Recording(mcp_app(), self.seen), self.port, timeout_graceful_shutdown=1)

    def stop(self) -> None:
        self.served.stop()

    def restart(self) -> None:
        self.stop()
        self._start()


@pytest.fixture
def downstream() -> Iterator[Downstream]:
    server = Downstream()
    yield server
    server.stop()


class Nowhere:
    async def publish(self, elicitation: Any, event: Any) -> None:
        return None


Kept = tuple[McpServerTrigger, Broker]


@pytest.fixture
async def kept(downstream: Downstream) -> AsyncIterator[Kept]:
    """A legacy-era trigger for the test server, with its broker."""
    broker = Broker(MemoryElicitations(), Nowhere())
    await broker.start()
    http = downstream_client(60)
    config = McpServerConfig(id="kept", url=downstream.url, protocol="legacy")
    trigger = McpServerTrigger(config, McpShared(broker, http, 60, 5))
    yield trigger, broker
    await trigger.close()
    await http.aclose()
    await broker.close()


def context(user: str, run: str, asker: Asker | None = None) -> CallContext:
    return CallContext(f"conv_{run}", run, user, True, asker)


async def test_calls_share_one_session_and_list_tools_once(downstream: Downstream, kept: Kept) -> None:
    trigger, _ = kept
    outcomes = await asyncio.gather(*(trigger.call("echo", {"text": str(i)}, context("alice", "r")) for i in range(5)))
    assert [o.text for o in outcomes] == [f"echo: {i}" for i in range(5)]
    assert await trigger.call("echo", {"text": "again"}, context("alice", "r")) == ToolOutcome("echo: again")
    methods = downstream.seen.methods()
    assert methods.count("initialize") == 1
    assert methods.count("tools/call") == 6
    assert methods.count("tools/list") == 1  # on opening, for the SDK's output-schema checks
    assert len({s for m, s, _ in downstream.seen.requests if m == "tools/call"}) == 1


async def test_concurrent_questions_on_one_session_reach_their_own_calls(downstream: Downstream, kept: Kept) -> None:
    trigger, broker = kept
    paused: dict[str, RunPaused] = {}
    both = asyncio.Event()

    def asker_for(run: str) -> Asker:
        async def emit(event: Any) -> None:
            if isinstance(event, RunPaused):
                paused[run] = event
                if len(paused) == 2:
                    both.set()

        return Asker(broker, emit=emit)

    calls = {
        user: asyncio.create_task(
            trigger.call("provision", {"name": user}, context(user, f"run_{user}", asker_for(f"run_{user}")))
        )
        for user in ("alice", "bob")
    }
    with anyio.fail_after(10):
        await both.wait()
    asked = {run: await broker.store.get(p.elicitation_ids[0]) for run, p in paused.items()}
    assert {run: (e.user_id, e.message) for run, e in asked.items() if e is not None} == {
        "run_alice": ("alice", "Which region should alice live in?"),
        "run_bob": ("bob", "Which region should bob live in?"),
    }
    # Each person answers only their own question; each call gets its own answer.
    await broker.respond(paused["run_bob"].elicitation_ids[0], Answer("accept", {"region": "us-east-1"}), "bob")
    await broker.respond(paused["run_alice"].elicitation_ids[0], Answer("accept", {"region": "eu-west-1"}), "alice")
    with anyio.fail_after(10):
        assert (await calls["alice"]).text == "alice in eu-west-1"
        assert (await calls["bob"]).text == "bob in us-east-1"
    assert downstream.seen.methods().count("initialize") == 1


async def test_a_restarted_server_gets_a_new_session_and_the_call_is_made_once(
    downstream: Downstream, kept: Kept
) -> None:
    trigger, _ = kept
    assert (await trigger.call("echo", {"text": "before"}, context("alice", "r"))).text == "echo: before"
    await asyncio.to_thread(downstream.restart)  # the new server knows no session: 404, a new one, the call
    assert (await trigger.call("echo", {"text": "after"}, context("alice", "r"))).text == "echo: after"
    requests = downstream.seen.requests
    assert [m for m, _, _ in requests].count("initialize") == 2
    calls = [session for method, session, _ in requests if method == "tools/call"]
    assert len(calls) == 3 and calls[1] == calls[0] != calls[2]  # the one refused with 404, then the new session


async def test_sessions_are_kept_per_credential_and_a_refused_one_is_dropped(
    downstream: Downstream, kept: Kept
) -> None:
    trigger, _ = kept
    for header in ("Bearer alice-token", "Bearer bob-token", "Bearer alice-token"):
        auth = CallAuth(header)
        outcome = await trigger._call("echo", {"text": header}, context("alice", "r"), auth)
        assert outcome.text == f"echo: {header}" and not auth.rejected
    refused = CallAuth("Bearer bad")
    outcome = await trigger._call("echo", {"text": "x"}, context("alice", "r"), refused)
    assert outcome.is_error and refused.rejected
    again = CallAuth("Bearer bad")
    await trigger._call("echo", {"text": "x"}, context("alice", "r"), again)
    assert again.rejected  # a new attempt, not a broken session remembered
    by_session: dict[str | None, set[str | None]] = {}
    for method, session, header in downstream.seen.requests:
        if method != "initialize":
            by_session.setdefault(session, set()).add(header)
    assert all(len(headers) == 1 for headers in by_session.values())  # no session ever carried two credentials
    initializes = [h for m, _, h in downstream.seen.requests if m == "initialize"]
    assert initializes.count("Bearer alice-token") == 1 and initializes.count("Bearer bob-token") == 1
    assert initializes.count("Bearer bad") == 2


async def test_calls_that_share_the_opening_of_a_refused_credentials_session_each_hear_it_was_refused(
    downstream: Downstream, kept: Kept
) -> None:
    trigger, _ = kept
    auths = [CallAuth("Bearer bad") for _ in range(3)]  # three calls of one person, at once (a listing among them)
    outcomes = await asyncio.gather(*(trigger._call("echo", {"text": "x"}, context("alice", "r"), a) for a in auths))
    assert [a.rejected for a in auths] == [True, True, True]  # the ones that waited on the first's opening too
    assert all(o == ToolOutcome("unauthorized", is_error=True) for o in outcomes)
    assert downstream.seen.methods().count("initialize") == 1  # one opening, which all three waited on


async def test_closing_the_trigger_ends_its_sessions(downstream: Downstream, kept: Kept) -> None:
    trigger, _ = kept
    await trigger.call("echo", {"text": "x"}, context("alice", "r"))
    await trigger.close()
    assert (await trigger.call("echo", {"text": "y"}, context("alice", "r"))).text == "echo: y"  # opens anew
    await trigger.close()
    assert downstream.seen.methods().count("initialize") == 2


async def test_a_server_dying_mid_question_fails_that_call_and_the_next_call_reconnects(
    downstream: Downstream, kept: Kept
) -> None:
    trigger, broker = kept
    asked = asyncio.Event()

    async def emit(event: Any) -> None:
        if isinstance(event, RunPaused):
            asked.set()

    call = asyncio.create_task(
        trigger.call("provision", {"name": "orders"}, context("alice", "run_1", Asker(broker, emit=emit)))
    )
    with anyio.fail_after(10):
        await asked.wait()
    await asyncio.to_thread(downstream.stop)  # the server goes away with the question open
    with anyio.fail_after(30):
        outcome = await call
    assert outcome.is_error and "failed during provision" in outcome.text
    await asyncio.to_thread(downstream.restart)
    assert (await trigger.call("echo", {"text": "back"}, context("alice", "r"))).text == "echo: back"
    assert downstream.seen.methods().count("initialize") == 2


async def test_a_connection_that_breaks_off_fails_its_own_call_and_not_the_others_on_the_session(
    downstream: Downstream, kept: Kept
) -> None:
    trigger, broker = kept
    paused: list[RunPaused] = []
    asked = asyncio.Event()

    async def emit(event: Any) -> None:
        if isinstance(event, RunPaused):
            paused.append(event)
            asked.set()

    call = asyncio.create_task(
        trigger.call("provision", {"name": "orders"}, context("alice", "run_1", Asker(broker, emit=emit)))
    )
    with anyio.fail_after(10):
        await asked.wait()  # alice's call is in flight on the session, its question open
    cut = await trigger.call("echo", {"text": CUT}, context("bob", "run_2"))
    assert cut.is_error and "broke off" in cut.text
    await broker.respond(paused[0].elicitation_ids[0], Answer("accept", {"region": "eu-west-1"}), "alice")
    with anyio.fail_after(10):
        assert (await call).text == "orders in eu-west-1"
    assert (await trigger.call("echo", {"text": "on"}, context("bob", "run_2"))).text == "echo: on"
    assert downstream.seen.methods().count("initialize") == 1  # the session lived through it


async def test_a_request_whose_connection_fails_before_its_response_gets_a_json_rpc_error() -> None:
    port = free_port()  # nothing listens there: the connection is refused
    transport = OneRequestFails(httpx2.AsyncHTTPTransport())
    async with httpx2.AsyncClient(transport=transport) as client:
        response = await client.post(f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "x"})
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["code"] == CONNECTION_FAILED and "the connection to the MCP server failed" in error["message"]
        with pytest.raises(httpx2.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/mcp")  # not a POST: as it was


async def test_a_session_nobody_uses_closes_and_the_next_call_opens_another(
    downstream: Downstream, kept: Kept, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions, "IDLE_S", 0.2)
    trigger, _ = kept
    await trigger.call("echo", {"text": "x"}, context("alice", "r"))
    await trigger.call("echo", {"text": "y"}, context("alice", "r"))  # in use within the idle time: kept
    assert downstream.seen.methods().count("initialize") == 1
    await until(lambda: len(downstream.seen.ended) == 1)  # closed once idle: the hub ends it at the server
    assert (await trigger.call("echo", {"text": "z"}, context("alice", "r"))).text == "echo: z"
    assert downstream.seen.methods().count("initialize") == 2


@pytest.fixture
async def standalone() -> AsyncIterator[Kept]:
    """A legacy-era trigger for a server that asks on its session's standalone stream, with its broker."""
    broker = Broker(MemoryElicitations(), Nowhere())
    await broker.start()
    http = downstream_client(60)
    with served(standalone_server.mcp_app(), timeout_graceful_shutdown=1) as server:
        config = McpServerConfig(id="standalone", url=f"{server.url}/mcp", protocol="legacy")
        trigger = McpServerTrigger(config, McpShared(broker, http, 60, 5))
        yield trigger, broker
        await trigger.close()
    await http.aclose()
    await broker.close()


def pausing(broker: Broker, runs: int) -> tuple[dict[str, RunPaused], asyncio.Event, Callable[[str], Asker]]:
    """Askers that note each run's pause, and an event set once `runs` runs have paused."""
    paused: dict[str, RunPaused] = {}
    all_paused = asyncio.Event()

    def asker_for(run: str) -> Asker:
        async def emit(event: Any) -> None:
            if isinstance(event, RunPaused):
                paused[run] = event
                if len(paused) == runs:
                    all_paused.set()

        return Asker(broker, emit=emit)

    return paused, all_paused, asker_for


@pytest.mark.parametrize(
    ("tool", "arguments", "answer", "text"),
    [
        (
            "provision",
            {"name": "orders"},
            Answer("accept", {"region": "eu-west-1"}),
            "Provisioned orders in eu-west-1.",
        ),
        ("connect", {}, Answer("accept"), "sign-in: accept"),
    ],
)
async def test_a_question_on_the_standalone_stream_belongs_to_the_one_call_in_flight(
    standalone: Kept, tool: str, arguments: dict[str, Any], answer: Answer, text: str
) -> None:
    trigger, broker = standalone
    paused, asked, asker_for = pausing(broker, 1)
    call = asyncio.create_task(trigger.call(tool, arguments, context("alice", "run_1", asker_for("run_1"))))
    with anyio.fail_after(10):
        await asked.wait()
    question = await broker.store.get(paused["run_1"].elicitation_ids[0])
    assert question is not None and question.user_id == "alice" and question.run_id == "run_1"
    assert question.context["toolName"] == tool
    await broker.respond(question.id, answer, "alice")
    with anyio.fail_after(10):
        assert await call == ToolOutcome(text)


async def test_a_question_on_the_standalone_stream_with_several_calls_in_flight_is_declined(
    standalone: Kept, caplog: pytest.LogCaptureFixture
) -> None:
    trigger, broker = standalone
    paused, _, asker_for = pausing(broker, 1)
    with anyio.fail_after(20):
        outcomes = await asyncio.gather(
            *(
                trigger.call("provision_together", {"name": user}, context(user, f"run_{user}", asker_for(user)))
                for user in ("alice", "bob")
            )
        )
    assert paused == {}  # nobody was asked: the hub cannot tell whose call asked
    assert all(o.is_error and "No user is waiting" in o.text for o in outcomes), outcomes
    declined = [r for r in caplog.records if r.levelname == "WARNING" and "standalone stream" in r.getMessage()]
    assert [r.getMessage() for r in declined] == [
        "standalone asked a question on its session's standalone stream while 2 of its tool calls were in"
        " flight; it was declined: the hub cannot tell which call it belongs to"
    ] * 2
