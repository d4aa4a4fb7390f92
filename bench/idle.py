"""A hub's memory once its conversations have gone idle past `conversations.retention_s`: RSS before, with N
conversations just written, and after the hub purged them.

Run:  uv run python bench/idle.py [--n 3000] [--kb 16] [--retention 2] [--store sqlite|redis]

One hub (`elicithub serve`, a SQLite file or a private redis-server) with the scripted model. N chats each send
one message of `--kb` KB in a conversation of its own and read the reply to its end. The hub's VmRSS is read
before, once they are written, and again once every one of them reads as gone (404) and a settle after that
(Redis forgets them by itself; SQLite once a sweep purges them); `--rounds` times. What stays and grows with each
round is what the hub still holds of conversations it no longer keeps; what stays the same is the allocator's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from memory import rss_bytes
from processes import chat_chunk, serve, start_redis, stop, wait_for_port

TOKEN = "alice-secret"
HEADERS = {"authorization": f"Bearer {TOKEN}"}
SETTLE_S = 2.0
GONE_WITHIN_S = 120.0

now = time.perf_counter


async def chat(http: aiohttp.ClientSession, url: str, text: str) -> str:
    """One message in a new conversation, its reply read to the end; the conversation's id."""
    body = {"model": "assistant", "stream": True, "messages": [{"role": "user", "content": text}]}
    async with http.post(f"{url}/run/v1/chat/completions", json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"chat {response.status}")
        async for raw in response.content:
            if chat_chunk(raw.decode().rstrip("\r\n")) == ("done", None):
                return response.headers["x-conversation-id"]
    raise RuntimeError("the stream ended without [DONE]")


async def chats(http: aiohttp.ClientSession, url: str, n: int, kb: int, concurrency: int) -> list[str]:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> str:
        async with gate:
            return await chat(http, url, f"{i:08d} " + "x" * (kb * 1024 - 9))

    return await asyncio.gather(*(one(i) for i in range(n)))


async def until_gone(http: aiohttp.ClientSession, url: str, conversation_ids: list[str]) -> float:
    """Seconds until every conversation reads as not found (the last one listed first: it went idle last)."""
    t0 = now()
    for conversation_id in reversed(conversation_ids):
        while True:
            async with http.get(f"{url}/run/api/conversations/{conversation_id}") as response:
                if response.status == 404:
                    break
                if now() - t0 > GONE_WITHIN_S:
                    raise RuntimeError(f"conversation {conversation_id} still kept after {GONE_WITHIN_S:.0f} s")
            await asyncio.sleep(0.5)
    return now() - t0


async def measure(url: str, pid: int, n: int, kb: int, concurrency: int, rounds: int) -> list[tuple[str, int]]:
    """The hub's RSS at each phase, and how long the last conversations took to go."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(headers=HEADERS, connector=connector) as http:
        warm = await chats(http, url, 20, kb, 4)  # code paths, and the allocator's first arenas
        await until_gone(http, url, warm)
        await asyncio.sleep(SETTLE_S)
        phases = [("before", rss_bytes(pid))]
        for round_ in range(1, rounds + 1):
            conversation_ids = await chats(http, url, n, kb, concurrency)
            phases.append((f"round {round_}: N written", rss_bytes(pid)))
            gone_s = await until_gone(http, url, conversation_ids)
            await asyncio.sleep(SETTLE_S)
            phases.append((f"round {round_}: N gone (after {gone_s:.1f} s)", rss_bytes(pid)))
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=3000, help="conversations (default 3000)")
    parser.add_argument("--kb", type=int, default=16, help="size of each one's message in KB (default 16)")
    parser.add_argument("--retention", type=float, default=2.0, help="conversations.retention_s (default 2)")
    parser.add_argument("--concurrency", type=int, default=32, help="chats at once (default 32)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of N, each measured once gone (default 2)")
    parser.add_argument("--store", choices=["sqlite", "redis"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp, contextlib.ExitStack() as running:
        workdir = Path(tmp)
        if args.store == "redis":
            redis, redis_port = start_redis(workdir)
            running.callback(stop, redis)
            store_url = f"redis://127.0.0.1:{redis_port}/0"
        else:
            store_url = f"sqlite:///{workdir / 'idle.db'}"
        config: dict[str, Any] = {
            "users": [{"id": "alice", "token": TOKEN}],
            "store": {"url": store_url, "heartbeat_s": 1},
            "conversations": {"retention_s": args.retention},
        }
        hub, port = serve(workdir, "hub", config)
        running.callback(stop, hub)
        wait_for_port(port, hub)
        url = f"http://127.0.0.1:{port}"
        phases = asyncio.run(measure(url, hub.pid, args.n, args.kb, args.concurrency, args.rounds))
    mb = 1024 * 1024
    print(f"N = {args.n} conversations of one {args.kb} KB message per round, one hub on {args.store}, ", end="")
    print(f"retention {args.retention:g} s; gone: each of them reads as not found, and {SETTLE_S:g} s more.\n")
    print("| phase | hub RSS (MB) | above before (MB) |")
    print("|---|---:|---:|")
    base = phases[0][1]
    for name, rss in phases:
        print(f"| {name} | {rss / mb:.1f} | {(rss - base) / mb:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
