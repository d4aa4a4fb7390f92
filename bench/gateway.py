"""One plain tool call (no question) made directly, through the hub's `/mcp` as a gateway, and through its agent.

Run:  uv run python bench/gateway.py [--n 200] [--warmup 10] [--block 100] [--seed 46] [--profile DIR]

Four processes: this one (the official Python SDK's clients), the MRTR test server (tests/servers/mrtr_server.py),
a hub (`elicithub serve`, memory store) pointed at it, and the least gateway the SDK makes (bench/sdk_proxy.py).
The tool is the server's `inventory`, which answers `{"count": 3}` without asking. Each iteration makes, in an order
shuffled afresh (so drift on the machine hits every mode alike), one call in each mode, each on its own SDK Client
connected once before the run:
- direct:            `inventory` on the test server;
- gateway:           `mrtr.inventory` on the hub's /mcp: the hub makes that one call, with no model in between;
- agent tool:        the hub's `assistant` tool with `/call mrtr.inventory ...`: a run of the scripted model;
- bare SDK proxy:    `mrtr.inventory` on sdk_proxy.py, which forwards it on a kept SDK Client: the extra hop alone;
each as a 2026-07-28 client and as a 2025-11-25 client. It prints p50/p95 per mode and each mode's ratio to the
direct call of its era (issue 46's target: the gateway within 1.5x of direct). Then, since wall time on a shared
machine moves with its load and CPU time much less, `--block` calls of each 2026-07-28 mode in a row, with the CPU
time each process used per call (/proc). `--profile DIR` then samples the hub with py-spy (`uv run --with py-spy`)
while it serves gateway calls alone, and prints where its CPU went.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import mcp_types as mt
import pyspy
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from processes import MRTR_SERVER, cpu_seconds, free_port, pct, serve, spawn, stop, wait_for_port

SDK_PROXY = Path(__file__).resolve().parent / "sdk_proxy.py"
TOKEN = "alice-secret"
ARGUMENTS = {"name": "shelf"}
ERAS = {"2026-07-28": "2026-07-28", "2025-11-25": "legacy"}
"""Each era's name, and the SDK Client's `mode` that speaks it."""
WAYS = ("direct", "gateway", "agent tool", "bare SDK proxy")
PROFILED_S = 10
"""How long py-spy samples the hub serving gateway calls."""

Call = Callable[[], Awaitable[None]]


def text(result: mt.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, mt.TextContent))


async def connect(stack: AsyncExitStack, url: str, mode: str, token: str | None) -> Client:
    if token is None:
        return await stack.enter_async_context(Client(url, mode=mode))
    http = await stack.enter_async_context(create_mcp_http_client(headers={"authorization": f"Bearer {token}"}))
    return await stack.enter_async_context(Client(streamable_http_client(url, http_client=http), mode=mode))


def checked(call: Callable[[], Awaitable[mt.CallToolResult]], name: str) -> Call:
    """The call, refused unless it gave the tool's own answer (a failed call must never count as a fast one)."""

    async def made() -> None:
        result = await call()
        if result.is_error or text(result) != "3":
            raise RuntimeError(f"{name}: {result}")

    return made


async def clients(stack: AsyncExitStack, server_url: str, hub_url: str, proxy_url: str) -> dict[str, Call]:
    """Every mode's call, named `WAY (ERA)`, each on a Client of its own."""
    calls: dict[str, Call] = {}
    message = {"message": f'/call mrtr.inventory {{"name": "{ARGUMENTS["name"]}"}}'}
    for era, mode in ERAS.items():
        direct = await connect(stack, server_url, mode, None)
        hub = await connect(stack, f"{hub_url}/mcp", mode, TOKEN)
        gateway = await connect(stack, f"{hub_url}/mcp", mode, TOKEN)
        proxy = await connect(stack, proxy_url, mode, None)
        made = {
            "direct": lambda c=direct: c.call_tool("inventory", ARGUMENTS),
            "gateway": lambda c=gateway: c.call_tool("mrtr.inventory", ARGUMENTS),
            "agent tool": lambda c=hub: c.call_tool("assistant", message),
            "bare SDK proxy": lambda c=proxy: c.call_tool("mrtr.inventory", ARGUMENTS),
        }
        for way in WAYS:
            calls[f"{way} ({era})"] = checked(made[way], f"{way} ({era})")
    return calls


async def latencies(calls: dict[str, Call], n: int, warmup: int, seed: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in calls}
    shuffler = random.Random(seed)
    order = list(calls)
    for i in range(warmup + n):
        shuffler.shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            await calls[name]()
            if i >= warmup:
                samples[name].append(time.perf_counter() - t0)
        if (i + 1) % 50 == 0:
            print(f"  {i + 1}/{warmup + n} iterations", file=sys.stderr, flush=True)
    return samples


async def cpu_per_call(calls: dict[str, Call], block: int, pids: dict[str, int]) -> dict[str, dict[str, float]]:
    """For each 2026-07-28 mode, `block` calls in a row: the CPU milliseconds per call of each process, this one
    (the client) included, and the wall milliseconds per call."""
    used: dict[str, dict[str, float]] = {}
    for way in WAYS:
        call = calls[f"{way} (2026-07-28)"]
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        client, wall = time.process_time(), time.perf_counter()
        for _ in range(block):
            await call()
        spent = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        spent["client"] = time.process_time() - client
        spent["wall"] = time.perf_counter() - wall
        used[way] = {name: 1000 * seconds / block for name, seconds in spent.items()}
    return used


async def profiled(call: Call, hub_pid: int, out: Path) -> str:
    """Gateway calls, one after another, for as long as py-spy samples the hub; its summary per call."""
    sampler = pyspy.record(hub_pid, PROFILED_S, out)
    made = 0
    while sampler.poll() is None:
        await call()
        made += 1
    return pyspy.summary(out, top=25, rounds=made)


def report(samples: dict[str, list[float]], used: dict[str, dict[str, float]], n: int, warmup: int) -> str:
    lines = [
        f"N = {n} calls per mode (after {warmup} warm-up), a plain tool call each, the modes shuffled per iteration.",
        "",
        "| mode | p50 (ms) | p95 (ms) | p50 / direct | p95 / direct |",
        "|---|---:|---:|---:|---:|",
    ]
    for era in ERAS:
        direct = samples[f"direct ({era})"]
        for way in WAYS:
            values = samples[f"{way} ({era})"]
            p50, p95 = pct(values, 50), pct(values, 95)
            ratios = f"{p50 / pct(direct, 50):.2f}x | {p95 / pct(direct, 95):.2f}x"
            lines.append(f"| {way} ({era}) | {p50:.2f} | {p95:.2f} | {ratios} |")
    names = ["client", "hub", "bare SDK proxy", "server"]
    lines += [
        "",
        "CPU milliseconds per call (2026-07-28), each mode's calls in a row (/proc; the client is this process):",
        "",
        f"| mode | {' | '.join(names)} | all | wall |",
        f"|---|{'---:|' * (len(names) + 2)}",
    ]
    for way, spent in used.items():
        cells = " | ".join(f"{spent[name]:.2f}" for name in names)
        lines.append(f"| {way} | {cells} | {sum(spent[name] for name in names):.2f} | {spent['wall']:.2f} |")
    return "\n".join(lines)


async def measure(args: argparse.Namespace, urls: dict[str, str], pids: dict[str, int]) -> str:
    async with AsyncExitStack() as stack:
        calls = await clients(stack, urls["server"], urls["hub"], urls["proxy"])
        samples = await latencies(calls, args.n, args.warmup, args.seed)
        used = await cpu_per_call(calls, args.block, pids)
        out = report(samples, used, args.n, args.warmup)
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            where = await profiled(calls["gateway (2026-07-28)"], pids["hub"], args.profile / "hub-gateway.txt")
            out += f"\n\nThe hub serving gateway calls (2026-07-28), py-spy for {PROFILED_S} s: {where}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=200, help="measured calls per mode (default 200)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up calls per mode, not counted (default 10)")
    parser.add_argument("--block", type=int, default=100, help="calls per mode for the CPU figures (default 100)")
    parser.add_argument("--seed", type=int, default=46, help="the shuffle's seed (default 46)")
    parser.add_argument("--profile", type=Path, help="sample the hub with py-spy into this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp:
        workdir = Path(tmp)
        mcp_port, proxy_port = free_port(), free_port()
        server_url = f"http://127.0.0.1:{mcp_port}/mcp"
        server = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / "mrtr.log")
        proxy = hub = None
        try:
            wait_for_port(mcp_port, server)
            # The proxy lists the server's tools as it starts.
            proxy = spawn([sys.executable, str(SDK_PROXY), str(proxy_port), server_url], workdir / "proxy.log")
            wait_for_port(proxy_port, proxy)
            config = {
                "store": {"url": "memory://"},
                "users": [{"id": "alice", "token": TOKEN}],
                "mcp_servers": [{"id": "mrtr", "url": server_url}],
                "secrets": {"key_file": str(workdir / "secret.key")},
            }
            hub, hub_port = serve(workdir, "hub", config)
            wait_for_port(hub_port, hub)
            urls = {
                "server": server_url,
                "hub": f"http://127.0.0.1:{hub_port}",
                "proxy": f"http://127.0.0.1:{proxy_port}/mcp",
            }
            pids = {"server": server.pid, "hub": hub.pid, "bare SDK proxy": proxy.pid}
            print(asyncio.run(measure(args, urls, pids)))
        finally:
            for process in (hub, proxy, server):
                if process is not None:
                    stop(process)


if __name__ == "__main__":
    main()
