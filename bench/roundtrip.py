"""Latency of one tool call with one form question: the official MCP SDK direct vs a chat round through the hub.

Run:  uv run python bench/roundtrip.py [--n 200] [--warmup 10]

Four processes: this one (the clients, and a timestamping TCP proxy), the MRTR test server
(tests/servers/mrtr_server.py), and two hubs started with `elicithub serve`: one pointed at the server, one pointed at
it through the proxy. Every mode runs once per iteration, interleaved (the order rotates), so drift on the machine hits
all modes alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import httpx2
import mcp_types as mt
from mcp import Client
from mcp.client import ClientRequestContext
from processes import MRTR_SERVER, chat_chunk, free_port, pct, serve, spawn, stop, wait_for_port

from elicithub import telemetry

TOKEN = "alice-secret"
ARGS = {"name": "orders"}
ANSWER = {"region": "eu-west-1"}
EXPECTED = "Provisioned orders in eu-west-1."
CHAT_BODY = {
    "model": "scripted",
    "stream": True,
    "messages": [{"role": "user", "content": '/call mrtr.provision {"name": "orders"}'}],
}

now = time.perf_counter  # CLOCK_MONOTONIC on Linux; every timestamp below is taken in this process.


# --- processes ---------------------------------------------------------------------------------------------------


def start_hub(
    workdir: Path, name: str, mcp_url: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    config = {
        "store": {"url": "memory://"},
        "users": [{"id": "alice", "token": TOKEN}],
        "mcp_servers": [{"id": "mrtr", "url": mcp_url}],
        "elicitation": {"timeout_s": 60},
    }
    return serve(workdir, name, config, env=env)


TRACED = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
"""Telemetry on (spans and metrics made and recorded) with nothing exported: the cost of the instrumentation."""


def telemetry_installed() -> bool:
    return importlib.util.find_spec("opentelemetry.sdk") is not None


def hook_cost_ns() -> float:
    """What one telemetry hook costs with telemetry off (nanoseconds): enter, note, exit."""
    assert not telemetry.enabled()
    n = 200_000
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with telemetry.tool_call("mrtr.provision") as span:
            span.note("is_error", False)
    return (time.perf_counter_ns() - t0) / n


# --- the timestamping proxy ----------------------------------------------------------------------------------------


class Proxy:
    """A byte-for-byte TCP proxy in front of the MCP server that notes when given JSON-RPC messages pass.

    A mark is the time this process read the first bytes containing the marker, just before forwarding them; only the
    first occurrence after `reset()` counts. Requests are recognised by their `mcp-method` header (the first bytes of
    a request), responses by their body; rounds are sequential, so the order of marks tells the requests apart.
    The hub keeps its downstream TCP connections alive in one pooled HTTP client, so a round usually opens none:
    `connections` counts only the new ones, and nothing here assumes a connection per round.
    """

    def __init__(self, port: int, upstream_port: int) -> None:
        self.port = port
        self.upstream_port = upstream_port
        self.marks: dict[str, float] = {}
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    def reset(self) -> None:
        self.marks = {}
        self.connections = 0

    async def close(self) -> None:
        """Stop accepting, close the pooled connections the hub still holds open, and wait for the pipes to end."""
        if self.server is not None:
            self.server.close()
        for writer in list(self.writers):
            writer.close()
        if self.tasks:
            _, pending = await asyncio.wait(self.tasks, timeout=5)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        self.connections += 1
        self.writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)  # TCP_NODELAY is on
            self.writers.add(up_writer)
            await asyncio.gather(self._pipe(reader, up_writer, "up"), self._pipe(up_reader, writer, "down"))
        except (ConnectionError, asyncio.CancelledError):
            pass  # shutting down; returning normally keeps asyncio from logging the cancelled handler
        finally:
            self.writers.discard(writer)
            self.tasks.discard(task)
            writer.close()

    def _note(self, direction: str, seen: bytes, t: float) -> None:
        marks = self.marks

        def mark(name: str) -> None:
            marks.setdefault(name, t)

        if direction == "up":  # hub -> MCP server
            if b"mcp-method: server/discover" in seen:
                mark("discover_sent")
            if b"mcp-method: tools/list" in seen:
                # Before the call: the hub refreshing its tool cache. After the result: the SDK re-listing tools on
                # the fresh session to find the tool's output schema (ClientSession.call_tool does that once per
                # session).
                mark("validation_list_sent" if "result_received" in marks else "tools_refresh_sent")
            if b"mcp-method: tools/call" in seen:
                mark("retry_sent" if "input_required_received" in marks else "call_sent")
        else:  # MCP server -> hub
            if b'"supportedVersions"' in seen:
                mark("discover_answered")
            if b'"resultType":"input_required"' in seen:
                mark("input_required_received")
            if EXPECTED.encode() in seen:
                mark("result_received")
            if b'"tools":[' in seen and "validation_list_sent" in marks:
                mark("validation_list_answered")

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str) -> None:
        tail = b""
        try:
            while data := await reader.read(65536):
                t = now()
                self._note(direction, tail + data, t)
                tail = (tail + data)[-64:]
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()


# --- the measured operations ---------------------------------------------------------------------------------------


@dataclass
class Samples:
    """Named series of durations in seconds, one value per measured iteration."""

    series: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.series.setdefault(name, []).append(value)

    def get(self, name: str) -> list[float]:
        return self.series.get(name, [])


def accept_answer() -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content=ANSWER)


def result_text(result: mt.CallToolResult | mt.InputRequiredResult | mt.Result) -> str:
    assert isinstance(result, mt.CallToolResult), f"expected a CallToolResult, got {type(result).__name__}"
    return "".join(b.text for b in result.content if isinstance(b, mt.TextContent))


class Direct:
    """The official SDK against the MCP server, with no hub."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.asked_at = 0.0
        self.open_client: Client | None = None

    async def callback(self, context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        self.asked_at = now()
        return accept_answer()

    async def sdk_reused(self, out: Samples | None) -> None:
        """`client.call_tool` on a Client opened once; the SDK drives the InputRequiredResult loop."""
        assert self.open_client is not None
        t0 = now()
        result = await self.open_client.call_tool("provision", ARGS)
        t1 = now()
        assert result_text(result) == EXPECTED
        if out is not None:
            out.add("sdk_reused.total", t1 - t0)

    async def sdk_fresh(self, out: Samples | None) -> None:
        """A new Client per call (what the hub does): connect, `call_tool`, close."""
        t0 = now()
        async with Client(self.url, elicitation_callback=self.callback) as client:
            t1 = now()
            result = await client.call_tool("provision", ARGS)
            t2 = now()
        t3 = now()
        assert result_text(result) == EXPECTED
        if out is not None:
            out.add("sdk_fresh.total", t3 - t0)
            out.add("sdk_fresh.connect", t1 - t0)
            out.add("sdk_fresh.leg1", self.asked_at - t1)  # call sent -> callback runs with the question
            out.add("sdk_fresh.leg2", t2 - self.asked_at)  # callback -> retry answered
            out.add("sdk_fresh.close", t3 - t2)

    async def manual_open(self, out: Samples | None) -> None:
        """Both legs by hand with `client.session.call_tool(..., allow_input_required=True)` on the open Client."""
        assert self.open_client is not None
        session = self.open_client.session
        t0 = now()
        first = await session.call_tool("provision", ARGS, allow_input_required=True)
        t1 = now()
        assert isinstance(first, mt.InputRequiredResult)
        second = await session.call_tool(
            "provision",
            ARGS,
            input_responses={"region": accept_answer()},
            request_state=first.request_state,
            allow_input_required=True,
        )
        t2 = now()
        assert result_text(second) == EXPECTED
        if out is not None:
            out.add("manual_open.leg1", t1 - t0)
            out.add("manual_open.leg2", t2 - t1)

    async def manual_fresh(self, out: Samples | None) -> None:
        """The hub's downstream pattern without the hub: fresh Client(mode=auto, cache=None), legs by hand, close."""
        t0 = now()
        async with Client(self.url, mode="auto", cache=None) as client:
            t1 = now()
            first = await client.session.call_tool("provision", ARGS, allow_input_required=True)
            t2 = now()
            assert isinstance(first, mt.InputRequiredResult)
            second = await client.session.call_tool(
                "provision",
                ARGS,
                input_responses={"region": accept_answer()},
                request_state=first.request_state,
                allow_input_required=True,
            )
            t3 = now()
        t4 = now()
        assert result_text(second) == EXPECTED
        if out is not None:
            out.add("manual_fresh.connect", t1 - t0)
            out.add("manual_fresh.leg1", t2 - t1)
            out.add("manual_fresh.leg2", t3 - t2)
            out.add("manual_fresh.close", t4 - t3)


@dataclass
class Round:
    """Client-side timestamps of one chat round through the hub."""

    sent: float = 0.0
    headers: float = 0.0
    question: float = 0.0
    answer_sent: float = 0.0
    answer_returned: float = 0.0
    resolved: float = 0.0
    result: float = 0.0
    done: float = 0.0
    text: str = ""


class ThroughHub:
    """A chat client: stream the chat request, answer the question with a second POST, read to [DONE]."""

    def __init__(self, base_url: str, name: str, proxy: Proxy | None = None) -> None:
        self.name = name
        self.proxy = proxy
        headers = {"authorization": f"Bearer {TOKEN}", "x-supports-elicitation": "true"}
        limits = httpx.Limits(max_keepalive_connections=4)
        self.http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30, limits=limits)

    async def answer(self, r: Round, conversation_id: str, elicitation_id: str) -> None:
        body = {
            "conversationId": conversation_id,
            "elicitationId": elicitation_id,
            "action": "accept",
            "content": ANSWER,
        }
        r.answer_sent = now()
        response = await self.http.post("/run/api/elicitation-responses", json=body)
        r.answer_returned = now()
        response.raise_for_status()

    async def round(self, out: Samples | None) -> None:
        if self.proxy is not None:
            self.proxy.reset()
        r = Round()
        answering: asyncio.Task[None] | None = None
        r.sent = now()
        async with self.http.stream("POST", "/run/v1/chat/completions", json=CHAT_BODY) as response:
            r.headers = now()
            response.raise_for_status()
            conversation_id = response.headers["x-conversation-id"]
            async for line in response.aiter_lines():
                chunk = chat_chunk(line)
                if chunk is None:
                    continue
                kind, value = chunk
                if kind == "done":
                    r.done = now()
                    break
                if kind == "text":
                    r.result = r.result or now()
                    r.text += value
                elif value["type"] == "elicitation-request":
                    r.question = now()
                    # Answer at once, concurrently: the stream keeps being read while the POST is in flight.
                    answering = asyncio.create_task(self.answer(r, conversation_id, value["elicitationId"]))
                elif value["type"] == "elicitation-resolved":
                    r.resolved = now()
        assert answering is not None, "the hub never asked"
        await answering
        assert r.text == EXPECTED, f"unexpected text: {r.text!r}"
        if out is not None:
            self.record(r, out)

    def record(self, r: Round, out: Samples) -> None:
        n = self.name
        out.add(f"{n}.total", r.done - r.sent)
        out.add(f"{n}.to_headers", r.headers - r.sent)
        out.add(f"{n}.to_question", r.question - r.sent)
        out.add(f"{n}.answer_to_result", r.result - r.answer_sent)
        out.add(f"{n}.answer_to_resolved", r.resolved - r.answer_sent)
        out.add(f"{n}.answer_post", r.answer_returned - r.answer_sent)
        out.add(f"{n}.result_to_done", r.done - r.result)
        if self.proxy is None:
            return
        m = self.proxy.marks
        out.add(f"{n}.refreshed_tools", 1.0 if "tools_refresh_sent" in m else 0.0)
        out.add(f"{n}.connections", float(self.proxy.connections))
        call_start = m.get("discover_sent", m["call_sent"])
        out.add(f"{n}.sent_to_downstream_connect", call_start - r.sent)
        if "discover_answered" in m:
            out.add(f"{n}.discover_roundtrip", m["discover_answered"] - m["discover_sent"])
            out.add(f"{n}.discovered_to_call", m["call_sent"] - m["discover_answered"])
        out.add(f"{n}.sent_to_call", m["call_sent"] - r.sent)
        out.add(f"{n}.server_leg1", m["input_required_received"] - m["call_sent"])
        out.add(f"{n}.A_input_required_to_question", r.question - m["input_required_received"])
        out.add(f"{n}.B_answer_to_retry", m["retry_sent"] - r.answer_sent)
        out.add(f"{n}.server_leg2", m["result_received"] - m["retry_sent"])
        out.add(f"{n}.C_result_to_client", r.result - m["result_received"])
        if "validation_list_answered" in m:
            out.add(f"{n}.result_to_list", m["validation_list_sent"] - m["result_received"])
            out.add(f"{n}.list_roundtrip", m["validation_list_answered"] - m["validation_list_sent"])
            out.add(f"{n}.listed_to_client", r.result - m["validation_list_answered"])

    async def wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                if (await self.http.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"hub {self.name} is not healthy")
            await asyncio.sleep(0.1)


# --- statistics and report -----------------------------------------------------------------------------------------


def sums(*series: list[float]) -> list[float]:
    return [sum(values) for values in zip(*series, strict=True)]


def table(rows: list[tuple[str, list[float], str]]) -> Iterator[str]:
    yield "| measurement | p50 ms | p95 ms | what it is |"
    yield "|---|---:|---:|---|"
    for name, values, what in rows:
        if values:
            yield f"| {name} | {pct(values, 50):.2f} | {pct(values, 95):.2f} | {what} |"


NOTES = [
    "Notes:",
    "- All times are wall clock in this process (time.perf_counter); percentiles interpolate between ranks.",
    "- Hub rounds include one more loopback HTTP hop than direct calls (client -> hub -> server). The hub keeps its",
    "  MCP session to the server open across tool calls (triggers/mcp/sessions.py), like 'reused Client'; rows for a",
    "  per-call discover or an after-result tools/list are left out when no round had one.",
    "- By subtraction, (a) = everything between the chat POST and the question that the direct first leg lacks:",
    "  chat request handling, run start, (cached) tool list, model turn, broker, store and event log, SSE, the",
    "  extra hop; 'vs fresh Client' goes negative because the hub pays no fresh client's ~20 ms TLS-context build.",
    "  (b) = the answer POST handling, waking the run, the retry, the result's SSE chunk, minus the direct leg 2",
    "  ('vs fresh Client': leg 2 + close). Percentiles of unpaired samples do not subtract exactly; treat these as",
    "  estimates.",
    "- At the wire (hub via the proxy, per-round differences): (a) = the InputRequiredResult body reaches the proxy",
    "  -> the chat client has parsed the elicitation-request chunk: forward to the hub, the hub's SDK parsing it,",
    "  Question.build + schema check, store.put, event log append and read, SSE encode, delivery, client parse.",
    "  (b) = answer POST",
    "  sent -> the retry's tools/call headers reach the proxy: HTTP + auth + body parse, broker.respond (lookup,",
    "  content validation, store transition), the run task waking, the SDK building and sending the retry.",
    "- The proxy adds a loopback hop each way to the hub's downstream traffic (compare the two hub totals).",
]


def report(s: Samples, n: int, warmup: int, elapsed: float, load: tuple[float, float]) -> str:
    g = s.get
    lines = [
        f"N = {n} measured iterations per mode (after {warmup} warm-up iterations), {elapsed:.0f} s in all; "
        f"1-minute load average {load[0]:.2f} before, {load[1]:.2f} after.",
        "",
    ]

    lines += ["## End to end: one tool call with one form question, answered at once", ""]
    lines += table(
        [
            ("direct SDK, Client reused", g("sdk_reused.total"), "`client.call_tool` on one open Client; SDK loop"),
            ("direct SDK, fresh Client", g("sdk_fresh.total"), "`async with Client(url)` + `call_tool` + close"),
            ("through the hub", g("hub.total"), "chat POST sent -> `[DONE]` read, incl. the answer POST"),
            ("through the hub via proxy", g("probe.total"), "same, hub's downstream traffic via the timing proxy"),
            ("through the hub, telemetry on", g("traced.total"), "same, OTEL_*_EXPORTER=none: spans made, not sent"),
        ]
    )
    lines += ["", "| ratio hub / direct | p50 | p95 |", "|---|---:|---:|"]
    for label, direct in (("vs fresh Client", "sdk_fresh.total"), ("vs reused Client", "sdk_reused.total")):
        p50 = pct(g("hub.total"), 50) / pct(g(direct), 50)
        p95 = pct(g("hub.total"), 95) / pct(g(direct), 95)
        lines.append(f"| {label} | {p50:.2f}x | {p95:.2f}x |")
    [hook_ns] = g("hook_off_ns")
    lines += [
        "",
        f"Telemetry off (the other hubs): a hook costs {hook_ns:.0f} ns (enter, note, exit; timed here, 200,000 "
        f"times); a round trip passes 3 (run, tool call, question wait), {3 * hook_ns / 1000:.2f} µs in all.",
    ]
    if g("traced.total"):
        extra = pct(g("traced.total"), 50) - pct(g("hub.total"), 50)
        lines.append(f"Telemetry on (spans and metrics recorded, not exported): {extra:+.2f} ms p50 against off.")

    lines += ["", "## The two legs, measured directly with the SDK (no hub)", ""]
    lines += table(
        [
            ("open session: leg 1", g("manual_open.leg1"), "`session.call_tool(allow_input_required=True)` -> IRR"),
            ("open session: leg 2", g("manual_open.leg2"), "retry with `input_responses`+`request_state` -> result"),
            ("fresh Client: connect", g("manual_fresh.connect"), "`Client(url, mode=auto, cache=None).__aenter__`"),
            ("fresh Client: leg 1", g("manual_fresh.leg1"), "as above, first call on the new connection"),
            ("fresh Client: leg 2", g("manual_fresh.leg2"), "as above"),
            ("fresh Client: close", g("manual_fresh.close"), "`__aexit__`"),
            ("SDK loop, fresh: connect", g("sdk_fresh.connect"), "`Client(url).__aenter__` (default cache)"),
            ("SDK loop, fresh: leg 1", g("sdk_fresh.leg1"), "`call_tool` sent -> elicitation callback runs"),
            ("SDK loop, fresh: leg 2", g("sdk_fresh.leg2"), "callback runs -> `call_tool` returns"),
            ("`httpx2.AsyncClient()`", g("httpx2_client"), "30 constructions, the first step of every fresh connect"),
        ]
    )

    lines += ["", "## Through the hub, from the chat client's side", ""]
    lines += table(
        [
            ("to response headers", g("hub.to_headers"), "chat POST sent -> SSE response headers read"),
            ("to question", g("hub.to_question"), "chat POST sent -> elicitation-request chunk parsed"),
            ("answer -> result", g("hub.answer_to_result"), "answer POST sent -> result text chunk parsed"),
            ("answer -> resolved event", g("hub.answer_to_resolved"), "answer POST sent -> elicitation-resolved chunk"),
            ("answer POST", g("hub.answer_post"), "answer POST sent -> its 200 read (runs concurrently)"),
            ("result -> [DONE]", g("hub.result_to_done"), "result text chunk -> `[DONE]`"),
        ]
    )

    fresh_leg1 = sums(g("manual_fresh.connect"), g("manual_fresh.leg1"))
    fresh_leg2 = sums(g("manual_fresh.leg2"), g("manual_fresh.close"))
    lines += ["", "## Hub overhead per question, by subtraction (difference of percentiles of unpaired samples)", ""]
    lines += ["| overhead | p50 ms | p95 ms | computed as |", "|---|---:|---:|---|"]
    for label, hub, direct, how in (
        ("(a) vs open session", "hub.to_question", g("manual_open.leg1"), "hub to-question - open-session leg 1"),
        ("(a) vs fresh Client", "hub.to_question", fresh_leg1, "hub to-question - (fresh connect + leg 1)"),
        ("(b) vs open session", "hub.answer_to_result", g("manual_open.leg2"), "hub answer->result - open leg 2"),
        ("(b) vs fresh Client", "hub.answer_to_result", fresh_leg2, "hub answer->result - (fresh leg 2 + close)"),
    ):
        d50 = pct(g(hub), 50) - pct(direct, 50)
        d95 = pct(g(hub), 95) - pct(direct, 95)
        lines.append(f"| {label} | {d50:.2f} | {d95:.2f} | {how} |")

    p = "probe"
    lines += ["", "## Hub overhead per question, timed at the wire (per-iteration differences, hub via proxy)", ""]
    lines += table(
        [
            (
                "chat POST -> first downstream request",
                g(f"{p}.sent_to_downstream_connect"),
                "-> hub's `server/discover` (a new session) or else `tools/call` seen",
            ),
            ("discover round trip", g(f"{p}.discover_roundtrip"), "discover seen -> its answer seen"),
            ("discovered -> tools/call", g(f"{p}.discovered_to_call"), "discover answer seen -> tools/call seen"),
            ("chat POST -> tools/call", g(f"{p}.sent_to_call"), "all hub work before the first downstream call"),
            ("server leg 1", g(f"{p}.server_leg1"), "tools/call seen -> InputRequiredResult seen"),
            ("**(a) IRR -> question**", g(f"{p}.A_input_required_to_question"), "IRR seen -> event parsed by client"),
            ("**(b) answer -> retry**", g(f"{p}.B_answer_to_retry"), "answer POST sent -> retry tools/call seen"),
            ("server leg 2", g(f"{p}.server_leg2"), "retry seen -> result seen"),
            ("(c) result -> client", g(f"{p}.C_result_to_client"), "result seen -> result text parsed by client"),
            ("(c1) result -> tools/list", g(f"{p}.result_to_list"), "result seen -> hub's SDK sends tools/list"),
            ("(c2) tools/list round trip", g(f"{p}.list_roundtrip"), "that tools/list seen -> its answer seen"),
            ("(c3) listed -> client", g(f"{p}.listed_to_client"), "list answer seen -> result text parsed by client"),
        ]
    )
    refreshed = int(sum(g(f"{p}.refreshed_tools")))
    conns = g(f"{p}.connections")
    lines += [
        "",
        f"Proxied rounds that also refreshed the hub's tools/list cache (30 s TTL): {refreshed} of {len(conns)}. "
        f"The hub reuses pooled keep-alive downstream connections: {sum(conns):.0f} new downstream TCP connections "
        f"in those {len(conns)} rounds ({sum(1 for c in conns if c):.0f} rounds opened any).",
        "",
        *NOTES,
    ]
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------------------------


async def measure(
    n: int, warmup: int, mcp_port: int, proxy_port: int, hub_url: str, probe_url: str, traced_url: str | None
) -> Samples:
    mcp_url = f"http://127.0.0.1:{mcp_port}/mcp"
    proxy = Proxy(proxy_port, mcp_port)
    await proxy.start()
    samples = Samples()
    for _ in range(30):
        # What each fresh SDK Client does first (mcp.shared._httpx_utils.create_mcp_http_client): build an httpx2
        # client, whose default transport loads the CA bundle into a new SSL context even for an http:// URL.
        t0 = now()
        http = httpx2.AsyncClient()
        samples.add("httpx2_client", now() - t0)
        await http.aclose()
    direct = Direct(mcp_url)
    hub = ThroughHub(hub_url, "hub")
    probe = ThroughHub(probe_url, "probe", proxy)
    traced = ThroughHub(traced_url, "traced") if traced_url is not None else None
    await hub.wait_ready()
    await probe.wait_ready()
    if traced is not None:
        await traced.wait_ready()
    async with Client(mcp_url, elicitation_callback=direct.callback) as client:
        direct.open_client = client
        modes: list[Callable[[Samples | None], Awaitable[None]]] = [
            direct.sdk_reused,
            direct.sdk_fresh,
            direct.manual_open,
            direct.manual_fresh,
            hub.round,
            probe.round,
            *([traced.round] if traced is not None else []),
        ]
        for i in range(warmup + n):
            out = samples if i >= warmup else None
            k = i % len(modes)
            for mode in modes[k:] + modes[:k]:
                await mode(out)
            if (i + 1) % 50 == 0:
                print(f"  {i + 1}/{warmup + n} iterations", file=sys.stderr, flush=True)
    await hub.http.aclose()
    await probe.http.aclose()
    if traced is not None:
        await traced.http.aclose()
    await proxy.close()
    samples.add("hook_off_ns", hook_cost_ns())
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=200, help="measured iterations per mode (default 200)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up iterations, not counted (default 10)")
    args = parser.parse_args()
    started, load_before = now(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp, contextlib.ExitStack() as running:
        workdir = Path(tmp)
        mcp_port, proxy_port = free_port(), free_port()
        mrtr = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / "mrtr.log")
        running.callback(stop, mrtr)
        wait_for_port(mcp_port, mrtr)
        hub, hub_port = start_hub(workdir, "hub", f"http://127.0.0.1:{mcp_port}/mcp")
        running.callback(stop, hub)
        probe, probe_port = start_hub(workdir, "probe", f"http://127.0.0.1:{proxy_port}/mcp")
        running.callback(stop, probe)
        traced_url = None
        if telemetry_installed():
            traced, traced_port = start_hub(workdir, "traced", f"http://127.0.0.1:{mcp_port}/mcp", TRACED)
            running.callback(stop, traced)
            wait_for_port(traced_port, traced)
            traced_url = f"http://127.0.0.1:{traced_port}"
        else:
            print("the otel extra is not installed: no 'telemetry on' mode", file=sys.stderr, flush=True)
        wait_for_port(hub_port, hub)
        wait_for_port(probe_port, probe)
        hub_url, probe_url = f"http://127.0.0.1:{hub_port}", f"http://127.0.0.1:{probe_port}"
        print(f"MCP server :{mcp_port}, hub {hub_url}, hub via proxy {probe_url}", file=sys.stderr, flush=True)
        samples = asyncio.run(measure(args.n, args.warmup, mcp_port, proxy_port, hub_url, probe_url, traced_url))
    print(report(samples, args.n, args.warmup, now() - started, (load_before, os.getloadavg()[0])))


if __name__ == "__main__":
    main()
