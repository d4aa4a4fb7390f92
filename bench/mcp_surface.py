"""One question through the hub's MCP server vs the same tool on a plain SDK server, measured in the same run.

Run:  uv run python bench/mcp_surface.py [--n 200] [--warmup 10]

Three processes: this one (the SDK clients), the MRTR test server (tests/servers/mrtr_server.py) and a hub
(`elicithub serve`, memory store) pointed at it. Each iteration calls, interleaved, with one connected SDK Client each:
- direct:       `provision` on the test server; its InputRequiredResult is answered by the client's callback;
- hub (MRTR):   the hub's `assistant` tool over /mcp as a 2026-07-28 client, which calls the same tool downstream;
                the question comes back to the client as the hub's own InputRequiredResult, then the retry;
- hub (legacy): the same as a 2025-11-25 client: the hub asks back with elicitation/create, the result on one call.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import mcp_types as mt
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from processes import MRTR_SERVER, free_port, pct, serve, spawn, stop, wait_for_port

TOKEN = "alice-secret"
EXPECTED = "Provisioned orders in eu-west-1."


async def answer(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"region": "eu-west-1"})


def text(result: mt.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, mt.TextContent))


async def measure(n: int, warmup: int, server_url: str, hub_url: str) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"direct": [], "hub (MRTR)": [], "hub (legacy)": []}
    async with AsyncExitStack() as stack:
        direct = await stack.enter_async_context(Client(server_url, mode="2026-07-28", elicitation_callback=answer))
        clients: dict[str, Client] = {"direct": direct}
        for name, mode in (("hub (MRTR)", "2026-07-28"), ("hub (legacy)", "legacy")):
            http = await stack.enter_async_context(create_mcp_http_client(headers={"authorization": f"Bearer {TOKEN}"}))
            transport = streamable_http_client(f"{hub_url}/mcp", http_client=http)
            clients[name] = await stack.enter_async_context(Client(transport, mode=mode, elicitation_callback=answer))
        calls = {
            "direct": lambda: clients["direct"].call_tool("provision", {"name": "orders"}),
            **{
                name: (
                    lambda c=clients[name]: c.call_tool(
                        "assistant", {"message": '/call mrtr.provision {"name": "orders"}'}
                    )
                )
                for name in ("hub (MRTR)", "hub (legacy)")
            },
        }
        order = list(calls)
        for i in range(warmup + n):
            order = order[1:] + order[:1]  # rotate, so drift hits every mode alike
            for name in order:
                t0 = time.perf_counter()
                result = await calls[name]()
                elapsed = time.perf_counter() - t0
                if text(result) != EXPECTED:
                    raise RuntimeError(f"{name}: {text(result)!r}")
                if i >= warmup:
                    samples[name].append(elapsed)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        mcp_port = free_port()
        server = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / "mrtr.log")
        hub = None
        try:
            wait_for_port(mcp_port, server)
            server_url = f"http://127.0.0.1:{mcp_port}/mcp"
            config = {
                "store": {"url": "memory://"},
                "users": [{"id": "alice", "token": TOKEN}],
                "mcp_servers": [{"id": "mrtr", "url": server_url}],
                "secrets": {"key_file": str(workdir / "secret.key")},
            }
            hub, hub_port = serve(workdir, "hub", config)
            wait_for_port(hub_port, hub)
            samples = asyncio.run(measure(args.n, args.warmup, server_url, f"http://127.0.0.1:{hub_port}"))
        finally:
            for process in (hub, server):
                if process is not None:
                    stop(process)
    base = pct(samples["direct"], 50)
    print(f"N = {args.n} calls per mode (after {args.warmup} warm-up), one question each, answered at once.\n")
    print("| mode | p50 (ms) | p95 (ms) | p50 / direct |")
    print("|---|---:|---:|---:|")
    for name, values in samples.items():
        p50, p95 = pct(values, 50), pct(values, 95)
        print(f"| {name} | {p50:.1f} | {p95:.1f} | {p50 / base:.2f}x |")


if __name__ == "__main__":
    main()
