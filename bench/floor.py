"""The floor under the hub's question path: the least code that does what the hub does there, with the same
libraries, measured side by side with the direct SDK call and the hub itself.

Run:  uv run python bench/floor.py [--n 150] [--warmup 10] [--floors default,h11,reused]

The floor (`serve_floor` below, started as its own process by this file) is a Starlette app that reads the same
chat request as the hub's `/run/v1/chat/completions`, calls the same downstream server through one MCP SDK client
(`Client(mode="auto", cache=None)`, kept open across calls as the hub keeps its sessions), relays the server's
question as one SSE event, takes the answer from a second POST and sends the retry: no store, no run loop, no
checks. What the libraries cost is the floor; the hub's distance from it is what our code costs.

Modes, one round trip each per iteration in a shuffled order (so drift on the machine hits all alike):
- `direct`: the official SDK `Client(url)` to the server, fresh per call, the SDK answering in its callback;
  `direct-open`: the same on one Client opened once;
- `floor[...]`: the floor under a variant of the choices below our code. `default`: uvicorn with httptools and
  uvloop, and one MCP client kept open across calls, as the hub runs (its `Sessions`; the 2026-07-28 protocol's
  calls carry no session, so one client serves every call); `h11`: the same on uvicorn's h11 and asyncio;
  `pooled`: a new MCP client per call over one pooled HTTP client (keep-alive, connections reused); `fresh`: a
  new MCP client per call with its own HTTP client, as the SDK's `Client(url)` does;
- `hub-memory`, `hub-sqlite`: `elicithub serve` on the memory store and on SQLite.

CPU per round trip is the serving process's (user + system, /proc) over the measured iterations divided by their
number; for `direct`, this process's own CPU around its calls (the SDK client alone, which the floor and the hub
also run inside them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as mt
from mcp import Client
from mcp.client import ClientRequestContext
from processes import MRTR_SERVER, chat_chunk, cpu_seconds, free_port, pct, serve, spawn, stop, wait_for_port

TOKEN = "alice-secret"
ANSWER = {"region": "eu-west-1"}
EXPECTED = "Provisioned orders in eu-west-1."
CHAT_BODY = {
    "model": "scripted",
    "stream": True,
    "messages": [{"role": "user", "content": '/call mrtr.provision {"name": "orders"}'}],
}
FLOORS = {
    "default": ["--loop", "uvloop", "--http", "httptools", "--session", "kept"],
    "h11": ["--loop", "asyncio", "--http", "h11", "--session", "kept"],
    "pooled": ["--loop", "uvloop", "--http", "httptools", "--session", "pooled"],
    "fresh": ["--loop", "uvloop", "--http", "httptools", "--session", "fresh"],
    "granian": ["--server", "granian", "--session", "kept"],
}


# --- the floor -----------------------------------------------------------------------------------------------------


def serve_floor(argv: list[str]) -> None:
    """`floor.py --serve-floor PORT MCP_URL [--server uvicorn|granian] [--loop L] [--http H] [--session S]`: the
    floor's own process."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve-floor", nargs=2, metavar=("PORT", "MCP_URL"), required=True)
    parser.add_argument("--server", choices=["uvicorn", "granian"], default="uvicorn")
    parser.add_argument("--loop", default="uvloop")
    parser.add_argument("--http", default="httptools")
    parser.add_argument("--session", choices=["kept", "pooled", "fresh"], default="kept")
    options = parser.parse_args(argv)
    port, mcp_url = int(options.serve_floor[0]), options.serve_floor[1]
    if options.server == "granian":
        from granian.server import Server  # not a dependency: `uv pip install granian` to measure it

        os.environ["FLOOR_MCP_URL"], os.environ["FLOOR_SESSION"] = mcp_url, options.session
        here = Path(__file__).parent
        Server("floor:granian_app", port=port, interface="asgi", factory=True, loop="uvloop", working_dir=here).serve()
        return
    import uvicorn

    app = floor_app(mcp_url, options.session)
    uvicorn.run(app, port=port, loop=options.loop, http=options.http, log_level="warning")


def granian_app() -> Any:
    """The floor for granian, which imports its app by name: told its options by the environment."""
    return floor_app(os.environ["FLOOR_MCP_URL"], os.environ["FLOOR_SESSION"])


def floor_app(mcp_url: str, session_kind: str) -> Any:
    """The floor's Starlette app: the chat POST and the answer POST, over one kind of MCP client session."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    answers: dict[str, asyncio.Future[dict[str, object]]] = {}
    kept: list[Client] = []
    pool = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300))

    def new_client() -> Client:
        if session_kind == "fresh":
            return Client(mcp_url, mode="auto", cache=None)
        return Client(streamable_http_client(mcp_url, http_client=pool), mode="auto", cache=None)

    def chunk(content: str) -> bytes:
        return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": content}}]}).encode() + b"\n\n"

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if session_kind != "kept":
            yield
            return
        async with new_client() as client:  # in the app's own lifetime task
            kept.append(client)
            yield

    async def rounds(tool: str, arguments: dict[str, object]) -> AsyncIterator[bytes]:
        reuse = session_kind == "kept"
        opened = kept[0] if reuse else new_client()
        session = opened if reuse else await opened.__aenter__()
        try:
            first = await session.session.call_tool(tool, arguments, allow_input_required=True)
            assert isinstance(first, mt.InputRequiredResult) and first.input_requests
            key, request = next(iter(first.input_requests.items()))
            assert isinstance(request, mt.ElicitRequest)
            question_id = secrets.token_urlsafe(8)
            answers[question_id] = asyncio.get_running_loop().create_future()
            params = request.params.model_dump(by_alias=True, exclude_none=True)
            yield chunk(json.dumps({"type": "elicitation-request", "elicitationId": question_id, **params}))
            content = await answers[question_id]
            second = await session.session.call_tool(
                tool,
                arguments,
                input_responses={key: mt.ElicitResult(action="accept", content=content)},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(second, mt.CallToolResult)
            yield chunk("".join(b.text for b in second.content if isinstance(b, mt.TextContent)))
            yield b"data: [DONE]\n\n"
        finally:
            if not reuse:
                await opened.__aexit__(None, None, None)

    async def chat(request: Request) -> Response:
        body = await request.json()
        _, name, arguments = body["messages"][-1]["content"].split(" ", 2)
        tool = name.split(".", 1)[1]
        return StreamingResponse(rounds(tool, json.loads(arguments)), media_type="text/event-stream")

    async def answer(request: Request) -> Response:
        body = await request.json()
        answers.pop(body["elicitationId"]).set_result(body["content"])
        return JSONResponse({"ok": True})

    routes = [
        Route("/run/v1/chat/completions", chat, methods=["POST"]),
        Route("/run/api/elicitation-responses", answer, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


# --- the clients ---------------------------------------------------------------------------------------------------


class Direct:
    """The official SDK to the server: a fresh Client per call, answering in its elicitation callback."""

    name = "direct"

    def __init__(self, url: str) -> None:
        self.url = url
        self.cpu = 0.0

    async def callback(self, context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        return mt.ElicitResult(action="accept", content=ANSWER)

    async def round(self) -> float:
        c0, t0 = time.process_time(), time.perf_counter()
        async with Client(self.url, elicitation_callback=self.callback) as client:
            result = await client.call_tool("provision", {"name": "orders"})
        took = time.perf_counter() - t0
        self.cpu += time.process_time() - c0
        assert isinstance(result, mt.CallToolResult)
        assert "".join(b.text for b in result.content if isinstance(b, mt.TextContent)) == EXPECTED
        return took


class DirectOpen(Direct):
    """The official SDK on one Client opened once: the least a caller of the server can pay per call."""

    name = "direct-open"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.client: Client | None = None

    async def round(self) -> float:
        assert self.client is not None, "open it first, in the task that will close it"
        c0, t0 = time.process_time(), time.perf_counter()
        result = await self.client.call_tool("provision", {"name": "orders"})
        took = time.perf_counter() - t0
        self.cpu += time.process_time() - c0
        assert isinstance(result, mt.CallToolResult)
        assert "".join(b.text for b in result.content if isinstance(b, mt.TextContent)) == EXPECTED
        return took


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children (granian serves from a worker process of its own)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return cpu_seconds(pid) + sum(tree_cpu(int(child)) for child in children)


class Chat:
    """A chat client of the hub or the floor: stream the chat, answer the question with a second POST."""

    def __init__(self, name: str, port: int, pid: int) -> None:
        self.name = name
        self.pid = pid
        headers = {"authorization": f"Bearer {TOKEN}", "x-supports-elicitation": "true"}
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30)
        self.cpu = 0.0

    async def round(self) -> float:
        c0 = tree_cpu(self.pid)
        t0 = time.perf_counter()
        text, answering = "", None
        async with self.http.stream("POST", "/run/v1/chat/completions", json=CHAT_BODY) as response:
            response.raise_for_status()
            conversation = response.headers.get("x-conversation-id")
            async for line in response.aiter_lines():
                chunk = chat_chunk(line)
                if chunk is None:
                    continue
                kind, value = chunk
                if kind == "done":
                    break
                if kind == "text":
                    text += value
                elif value["type"] == "elicitation-request":
                    body = {"conversationId": conversation, "elicitationId": value["elicitationId"]}
                    body |= {"action": "accept", "content": ANSWER}
                    answering = asyncio.create_task(self.http.post("/run/api/elicitation-responses", json=body))
        took = time.perf_counter() - t0
        assert answering is not None, f"{self.name} never asked"
        (await answering).raise_for_status()
        assert text == EXPECTED, f"{self.name}: {text!r}"
        self.cpu += tree_cpu(self.pid) - c0
        return took


# --- the run -------------------------------------------------------------------------------------------------------


async def measure(modes: list[Direct | Chat], n: int, warmup: int) -> dict[str, list[float]]:
    for _ in range(warmup):
        for mode in modes:
            await mode.round()
    for mode in modes:
        mode.cpu = 0.0
    samples: dict[str, list[float]] = {mode.name: [] for mode in modes}
    order = list(modes)
    for _ in range(n):
        random.shuffle(order)
        for mode in order:
            samples[mode.name].append(await mode.round())
    return samples


def report(modes: list[Direct | Chat], samples: dict[str, list[float]], n: int) -> None:
    floor = next(m for m in modes if m.name == "floor[default]")
    floor_p50, floor_cpu = pct(samples[floor.name], 50), floor.cpu / n
    print("| mode | p50 ms | p95 ms | CPU ms per round trip | p50 / floor | CPU / floor |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode in modes:
        p50, cpu = pct(samples[mode.name], 50), mode.cpu / n
        print(
            f"| {mode.name} | {p50:.2f} | {pct(samples[mode.name], 95):.2f} | {1000 * cpu:.2f} "
            f"| {p50 / floor_p50:.2f}x | {cpu / floor_cpu:.2f}x |"
        )


async def run(n: int, warmup: int, floors: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-floor-") as tmp:
        workdir = Path(tmp)
        processes = []
        try:
            async with contextlib.AsyncExitStack() as stack:
                await measured(workdir, processes, stack, n, warmup, floors)
        finally:
            for process in processes:
                stop(process)


async def measured(
    workdir: Path,
    processes: list[subprocess.Popen[bytes]],
    stack: contextlib.AsyncExitStack,
    n: int,
    warmup: int,
    floors: list[str],
) -> None:
    server_port = free_port()
    server = spawn([sys.executable, str(MRTR_SERVER), str(server_port)], workdir / "mrtr.log")
    processes.append(server)
    wait_for_port(server_port, server)
    mcp_url = f"http://127.0.0.1:{server_port}/mcp"
    direct_open = DirectOpen(mcp_url)
    direct_open.client = await stack.enter_async_context(Client(mcp_url, elicitation_callback=direct_open.callback))
    modes: list[Direct | Chat] = [Direct(mcp_url), direct_open]
    for variant in floors:
        port = free_port()
        command = [sys.executable, __file__, "--serve-floor", str(port), mcp_url, *FLOORS[variant]]
        floor = spawn(command, workdir / f"floor-{variant}.log")
        processes.append(floor)
        wait_for_port(port, floor)
        modes.append(Chat(f"floor[{variant}]", port, floor.pid))
    for store in ("memory", "sqlite"):
        url = "memory://" if store == "memory" else f"sqlite:///{workdir}/hub.db"
        config = {
            "store": {"url": url},
            "users": [{"id": "alice", "token": TOKEN}],
            "mcp_servers": [{"id": "mrtr", "url": mcp_url}],
        }
        key = secrets.token_urlsafe(32)
        hub, port = serve(workdir, f"hub-{store}", config, ["--no-access-log"], {"ELICITHUB_SECRET_KEY": key})
        processes.append(hub)
        wait_for_port(port, hub)
        modes.append(Chat(f"hub-{store}", port, hub.pid))
    samples = await measure(modes, n, warmup)
    report(modes, samples, n)


def main() -> None:
    if "--serve-floor" in sys.argv:
        serve_floor(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--floors", default="default,h11,pooled,fresh", help=f"comma-separated, of {', '.join(FLOORS)}")
    args = parser.parse_args()
    floors = args.floors.split(",")
    if "default" not in floors:
        floors.insert(0, "default")
    asyncio.run(run(args.n, args.warmup, floors))


if __name__ == "__main__":
    main()
