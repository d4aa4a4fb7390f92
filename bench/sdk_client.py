"""What the official MCP SDK's client costs the hub per downstream question round trip, against the same two
requests sent by hand.

The hub's downstream pattern for a 2026-07-28 question is two `tools/call` requests on an open `mcp.Client`
(`session.call_tool(..., allow_input_required=True)`: the InputRequiredResult, then the retry with the answer).
This script makes those two requests both ways against tests/servers/mrtr_server.py, interleaved in blocks in one
process: through the SDK, and as the same JSON-RPC bodies POSTed with the same HTTP client (`httpx2`, which the SDK
uses) and parsed with `json`. The difference is the SDK's own work. With `--profile` it then samples the SDK way
under cProfile and groups the client's CPU by the SDK layer it was spent in.

    uv run python bench/sdk_client.py [--n 400] [--block 20] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2
import mcp_types as mt
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from processes import MRTR_SERVER, free_port, spawn, stop, wait_for_port

ARGS = {"name": "orders"}
ANSWER = {"action": "accept", "content": {"region": "eu-west-1"}}
EXPECTED = "Provisioned orders in eu-west-1."
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}

Mode = Callable[[], Awaitable[None]]


class Sdk:
    """Both legs through the SDK, on one open Client: what triggers/mcp/server.py does."""

    def __init__(self, client: Client) -> None:
        self.session = client.session

    async def round(self) -> None:
        first = await self.session.call_tool("provision", ARGS, allow_input_required=True)
        assert isinstance(first, mt.InputRequiredResult)
        second = await self.session.call_tool(
            "provision",
            ARGS,
            input_responses={"region": mt.ElicitResult(action="accept", content=ANSWER["content"])},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(second, mt.CallToolResult)
        assert "".join(b.text for b in second.content if isinstance(b, mt.TextContent)) == EXPECTED


class ByHand:
    """The same two requests, bodies and headers as the SDK sends them, on the SDK's HTTP client, parsed with json."""

    def __init__(self, url: str, http: httpx2.AsyncClient) -> None:
        self.url = url
        self.http = http
        self.next_id = 0

    async def call(self, params: dict[str, object]) -> dict[str, object]:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": {**params, "_meta": META}}
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": VERSION,
            "mcp-method": "tools/call",
            "mcp-name": "provision",
        }
        response = await self.http.post(self.url, content=json.dumps(body, separators=(",", ":")), headers=headers)
        reply = json.loads(response.content)
        result: dict[str, object] = reply["result"]
        return result

    async def round(self) -> None:
        first = await self.call({"name": "provision", "arguments": ARGS})
        assert first["resultType"] == "input_required"
        second = await self.call(
            {
                "name": "provision",
                "arguments": ARGS,
                "inputResponses": {"region": ANSWER},
                "requestState": first["requestState"],
            }
        )
        content = second["content"]
        assert isinstance(content, list) and content[0]["text"] == EXPECTED


async def block(mode: Mode, size: int, wall: list[float]) -> float:
    """`size` rounds of `mode`; their wall times go to `wall`; returns this process's CPU seconds for the block."""
    cpu = time.process_time()
    for _ in range(size):
        t0 = time.perf_counter()
        await mode()
        wall.append(time.perf_counter() - t0)
    return time.process_time() - cpu


LAYERS = [
    ("the SDK's streamable HTTP client transport and dispatcher (mcp.client, mcp.shared)", ("mcp/",)),
    (
        "anyio and sniffio (the SDK's memory streams, task groups and cancel scopes; httpcore2's backend)",
        ("anyio", "sniffio"),
    ),
    ("pydantic (mcp_types models: results, envelopes, params)", ("pydantic", "mcp_types")),
    ("httpx2 / httpcore2 / h11 (the HTTP exchange itself)", ("httpx2", "httpcore2", "h11")),
    ("asyncio (tasks, futures, the loop's own turns)", ("asyncio",)),
]
IDLE = ("poll' of 'select.epoll", "select.select")
"""Time the loop spent waiting for the server: not CPU, left out."""


def layers(profile: cProfile.Profile) -> list[tuple[str, float]]:
    """Each layer's own (tottime) seconds, by the file its functions live in (a builtin by its own name); time spent
    waiting in the selector is left out, the rest is one line."""
    stats = pstats.Stats(profile)
    totals: dict[str, float] = {name: 0.0 for name, _ in LAYERS}
    rest = 0.0
    for (filename, _, function), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = function if filename == "~" else filename
        if any(idle in where for idle in IDLE):
            continue
        for name, markers in LAYERS:
            if any(marker in where for marker in markers):
                totals[name] += tottime
                break
        else:
            rest += tottime
    return [*totals.items(), ("everything else (sockets, json, the benchmark itself, builtins)", rest)]


async def measure(url: str, n: int, size: int, profile: bool) -> str:
    wall: dict[str, list[float]] = {"sdk": [], "hand": []}
    cpu: dict[str, float] = {"sdk": 0.0, "hand": 0.0}
    async with Client(url, mode="auto", cache=None) as client, httpx2.AsyncClient(timeout=30) as http:
        modes: dict[str, Mode] = {"sdk": Sdk(client).round, "hand": ByHand(url, http).round}
        for mode in modes.values():  # warm-up: connections, imports, caches
            for _ in range(10):
                await mode()
        for i in range(max(n // size, 1)):
            order = ["sdk", "hand"] if i % 2 == 0 else ["hand", "sdk"]
            for name in order:
                cpu[name] += await block(modes[name], size, wall[name])
        rounds = max(n // size, 1) * size
        lines = [
            f"{rounds} rounds each (two `tools/call` per round), interleaved in blocks of {size}; "
            f"load average {os.getloadavg()[0]:.2f}",
            "",
            "| way | client CPU ms / round | p50 ms | p95 ms |",
            "|---|---:|---:|---:|",
        ]
        for name, label in (("sdk", "official SDK (`session.call_tool`)"), ("hand", "same requests by hand")):
            samples = sorted(wall[name])
            p95 = samples[int(len(samples) * 0.95) - 1]
            lines.append(
                f"| {label} | {cpu[name] / rounds * 1000:.2f} | {statistics.median(samples) * 1000:.2f} "
                f"| {p95 * 1000:.2f} |"
            )
        sdk_cost = (cpu["sdk"] - cpu["hand"]) / rounds * 1000
        lines += ["", f"The SDK's own work: {sdk_cost:.2f} ms of CPU per question round trip (two requests)."]
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(rounds):
                await modes["sdk"]()
            profiler.disable()
            by_layer = layers(profiler)
            total = sum(seconds for _, seconds in by_layer) or 1.0
            lines += ["", "Where the SDK way's client CPU goes (cProfile, own time by file):", ""]
            lines += ["| layer | share |", "|---|---:|"]
            lines += [f"| {name} | {seconds / total:.0%} |" for name, seconds in by_layer]
        return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=400, help="measured rounds per way (default 400)")
    parser.add_argument("--block", type=int, default=20, help="rounds per interleaved block (default 20)")
    parser.add_argument("--profile", action="store_true", help="also group the SDK way's CPU by layer (cProfile)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp, contextlib.ExitStack() as running:
        port = free_port()
        server = spawn([sys.executable, str(MRTR_SERVER), str(port)], Path(tmp) / "mrtr.log")
        running.callback(stop, server)
        wait_for_port(port, server)
        print(asyncio.run(measure(f"http://127.0.0.1:{port}/mcp", args.n, min(args.block, args.n), args.profile)))


if __name__ == "__main__":
    main()
