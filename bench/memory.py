"""A hub's memory per waiting question: RSS with N questions pending, their streams closed, then open.

Run:  uv run python bench/memory.py [--n 10000] [--concurrency 64] [--store sqlite|redis] [--fast]

One hub (`elicithub serve`, a SQLite file or a private redis-server) and the MRTR test server. N chats each start a
run whose tool call (`/call mrtr.provision`) asks one 2026-07-28 question; the chat is read up to the question and
its stream closed, so the run waits with nobody reading. The hub's VmRSS is read before and after (each after a
short settle), and again after N more chats whose streams stay open. Per pending question = the growth / N.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from processes import MRTR_SERVER, chat_chunk, free_port, serve, spawn, start_redis, stop, wait_for_port

TOKEN = "alice-secret"
HEADERS = {"authorization": f"Bearer {TOKEN}", "x-supports-elicitation": "true"}
CHAT_BODY = {
    "model": "scripted",
    "stream": True,
    "messages": [{"role": "user", "content": '/call mrtr.provision {"name": "orders"}'}],
}
SETTLE_S = 2.0

now = time.perf_counter


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


async def until_asked(response: aiohttp.ClientResponse) -> None:
    if response.status != 200:
        raise RuntimeError(f"chat {response.status}")
    said = ""
    async for raw in response.content:
        chunk = chat_chunk(raw.decode().rstrip("\r\n"))
        if chunk is not None and chunk[0] == "event" and chunk[1]["type"] == "elicitation-request":
            return
        if chunk is not None and chunk[0] == "text":
            said += chunk[1]
    raise RuntimeError(f"the stream ended without a question: {said[:300]!r}")


async def ask(http: aiohttp.ClientSession, url: str, n: int, concurrency: int, keep_open: bool) -> list[Any]:
    """n chats paused on a question; their responses still open when `keep_open`."""
    held: list[Any] = []
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            response = await http.post(f"{url}/run/v1/chat/completions", json=CHAT_BODY)
            await until_asked(response)
            if keep_open:
                held.append(response)
            else:
                response.close()

    await asyncio.gather(*(one() for _ in range(n)))
    return held


async def measure(url: str, pid: int, n: int, concurrency: int) -> dict[str, float]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(headers=HEADERS, connector=connector, timeout=timeout) as http:
        await ask(http, url, 20, 4, keep_open=False)  # warm: tool list, sessions, code paths
        await asyncio.sleep(SETTLE_S)
        base = rss_bytes(pid)
        t0 = now()
        await ask(http, url, n, concurrency, keep_open=False)
        closed_s = now() - t0
        await asyncio.sleep(SETTLE_S)
        closed = rss_bytes(pid)
        t0 = now()
        held = await ask(http, url, n, concurrency, keep_open=True)
        open_s = now() - t0
        await asyncio.sleep(SETTLE_S)
        opened = rss_bytes(pid)
        for response in held:
            response.close()
    return {"base": base, "closed": closed, "open": opened, "closed s": closed_s, "open s": open_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=10_000, help="questions pending in each phase (default 10000)")
    parser.add_argument("--concurrency", type=int, default=64, help="chats started at once (default 64)")
    parser.add_argument("--store", choices=["sqlite", "redis"], default="sqlite")
    parser.add_argument("--fast", action="store_true", help="the hub on uvloop and httptools (the fast extra)")
    args = parser.parse_args()
    started, load_before = now(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp, contextlib.ExitStack() as running:
        workdir = Path(tmp)
        mcp_port = free_port()
        mrtr = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / "mrtr.log")
        running.callback(stop, mrtr)
        wait_for_port(mcp_port, mrtr)
        if args.store == "redis":
            redis, redis_port = start_redis(workdir)
            running.callback(stop, redis)
            store_url = f"redis://127.0.0.1:{redis_port}/0"
        else:
            store_url = f"sqlite:///{workdir / 'memory.db'}"
        config: dict[str, Any] = {
            "users": [{"id": "alice", "token": TOKEN}],
            "mcp_servers": [{"id": "mrtr", "url": f"http://127.0.0.1:{mcp_port}/mcp"}],
            "elicitation": {"timeout_s": 3600},
            "store": {"url": store_url},
        }
        options = ["--loop", "uvloop", "--http", "httptools"] if args.fast else []
        hub, port = serve(workdir, "hub", config, options)
        running.callback(stop, hub)
        wait_for_port(port, hub)
        got = asyncio.run(measure(f"http://127.0.0.1:{port}", hub.pid, args.n, args.concurrency))
    mb = 1024 * 1024
    per_closed = (got["closed"] - got["base"]) / args.n / 1024
    per_open = (got["open"] - got["closed"]) / args.n / 1024
    print(
        f"N = {args.n} questions pending per phase, one hub on {args.store}"
        f"{' (uvloop + httptools)' if args.fast else ''}, {now() - started:.0f} s in all; "
        f"1-minute load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after.\n"
    )
    print("| phase | hub RSS (MB) | growth (MB) | per pending question (KB) | time to ask them (s) |")
    print("|---|---:|---:|---:|---:|")
    print(f"| before | {got['base'] / mb:.1f} | | | |")
    print(
        f"| N waiting, streams closed | {got['closed'] / mb:.1f} | {(got['closed'] - got['base']) / mb:.1f} "
        f"| {per_closed:.1f} | {got['closed s']:.1f} |"
    )
    print(
        f"| N more waiting, streams open | {got['open'] / mb:.1f} | {(got['open'] - got['closed']) / mb:.1f} "
        f"| {per_open:.1f} | {got['open s']:.1f} |"
    )


if __name__ == "__main__":
    main()
