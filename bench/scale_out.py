"""How soon a run learns of its answer when the answer reaches another hub: cross-instance vs same-instance.

Run:  uv run python bench/scale_out.py [--n 200] [--warmup 10]

Processes: this one (the clients), a private redis-server and PostgreSQL cluster, the MRTR test server
(tests/servers/mrtr_server.py), two hubs A and B started with `elicithub serve` and one config
(`store.url: redis://...`), two more, C and D, sharing a Postgres store, and a hub S on its own SQLite file as a
single-instance reference. Each round opens a chat on A (C, S) with `/call mrtr.provision`, waits for the
elicitation-request chunk, POSTs the answer to B (D: cross-instance) or to the same hub, and times the answer POST
being sent -> the run's stream delivering the elicitation-resolved chunk. The modes run interleaved, order rotating.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from processes import MRTR_SERVER, free_port, pct, serve, spawn, start_postgres, start_redis, stop, wait_for_port

TOKEN = "alice-secret"
AUTH = {"authorization": f"Bearer {TOKEN}"}
CHAT = {
    "model": "scripted",
    "stream": True,
    "messages": [{"role": "user", "content": '/call mrtr.provision {"name": "orders"}'}],
}
EXPECTED = "Provisioned orders in eu-west-1."

now = time.perf_counter


def events(line: str) -> Iterator[dict[str, Any] | str]:
    """The elicitation event (dict) or text (str) of one SSE line of an OpenAI-compatible stream."""
    if not line.startswith("data: ") or line == "data: [DONE]":
        return
    chunk = json.loads(line.removeprefix("data: "))
    content = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
    if content and content.startswith('{"type": "elicitation-'):
        yield json.loads(content)
    elif content:
        yield content


async def round_trip(run_on: httpx.AsyncClient, answer_to: httpx.AsyncClient) -> tuple[float, float]:
    """One question: (answer POST sent -> resolved chunk on the run's stream, answer POST sent -> its 200)."""
    headers = {"x-supports-elicitation": "true"}
    posted: asyncio.Task[float] | None = None
    t_resolved = t_sent = 0.0
    text = []
    async with run_on.stream("POST", "/run/v1/chat/completions", json=CHAT, headers=headers) as response:
        conversation = response.headers["x-conversation-id"]
        async for line in response.aiter_lines():
            for item in events(line):
                if isinstance(item, str):
                    text.append(item)
                elif item["type"] == "elicitation-request":
                    body = {
                        "conversationId": conversation,
                        "elicitationId": item["elicitationId"],
                        "action": "accept",
                        "content": {"region": "eu-west-1"},
                    }

                    async def post(body: dict[str, Any] = body) -> float:
                        reply = await answer_to.post("/run/api/elicitation-responses", json=body)
                        if reply.status_code != 200:
                            raise RuntimeError(f"answer: {reply.status_code} {reply.text}")
                        return now()

                    t_sent = now()
                    posted = asyncio.create_task(post())
                elif item["type"] == "elicitation-resolved":
                    t_resolved = now()
    if posted is None or not t_resolved or "".join(text) != EXPECTED:
        raise RuntimeError(f"unexpected round: {''.join(text)!r}")
    return t_resolved - t_sent, await posted - t_sent


async def measure(n: int, warmup: int, hubs: dict[str, str]) -> dict[str, tuple[list[float], list[float]]]:
    async with contextlib.AsyncExitStack() as clients:
        on = {
            name: await clients.enter_async_context(httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30))
            for name, url in hubs.items()
        }
        modes = {
            "redis, cross-instance (run on A, answer to B)": (on["a"], on["b"]),
            "redis, same instance (run on A, answer to A)": (on["a"], on["a"]),
            "postgres, cross-instance (run on C, answer to D)": (on["c"], on["d"]),
            "postgres, same instance (run on C, answer to C)": (on["c"], on["c"]),
            "sqlite, same instance (one hub)": (on["s"], on["s"]),
        }
        samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in modes}
        names = list(modes)
        for i in range(warmup + n):
            k = i % len(names)
            for name in names[k:] + names[:k]:
                resolved, answered = await round_trip(*modes[name])
                if i >= warmup:
                    samples[name][0].append(resolved)
                    samples[name][1].append(answered)
            if (i + 1) % 50 == 0:
                print(f"  {i + 1}/{warmup + n} rounds", file=sys.stderr, flush=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=200, help="measured rounds per mode (default 200)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up rounds, not counted (default 10)")
    args = parser.parse_args()
    started, load_before = now(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp, contextlib.ExitStack() as running:
        workdir = Path(tmp)
        redis, redis_port = start_redis(workdir)
        running.callback(stop, redis)
        mcp_port = free_port()
        mrtr = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / "mrtr.log")
        running.callback(stop, mrtr)
        wait_for_port(mcp_port, mrtr)
        config: dict[str, Any] = {
            "users": [{"id": "alice", "token": TOKEN}],
            "mcp_servers": [{"id": "mrtr", "url": f"http://127.0.0.1:{mcp_port}/mcp"}],
            "elicitation": {"timeout_s": 60},
        }
        postgres, postgres_url, postgres_dir = start_postgres()
        running.callback(shutil.rmtree, postgres_dir, ignore_errors=True)
        running.callback(stop, postgres)
        shared = config | {"store": {"url": f"redis://127.0.0.1:{redis_port}/0"}}
        on_postgres = config | {"store": {"url": postgres_url}}
        hubs = {
            "a": serve(workdir, "a", shared),
            "b": serve(workdir, "b", shared),
            "c": serve(workdir, "c", on_postgres),
            "d": serve(workdir, "d", on_postgres),
            "s": serve(workdir, "s", config | {"store": {"url": f"sqlite:///{workdir / 's.db'}"}}),
        }
        for process, _ in hubs.values():
            running.callback(stop, process)
        for process, port in hubs.values():
            wait_for_port(port, process)
        urls = {name: f"http://127.0.0.1:{port}" for name, (_, port) in hubs.items()}
        print(f"redis :{redis_port}, MCP server :{mcp_port}, hubs {urls}", file=sys.stderr, flush=True)
        samples = asyncio.run(measure(args.n, args.warmup, urls))
    elapsed, load_after = now() - started, os.getloadavg()[0]
    print(
        f"N = {args.n} measured rounds per mode (after {args.warmup} warm-up), {elapsed:.0f} s in all; "
        f"1-minute load average {load_before:.2f} before, {load_after:.2f} after.\n"
    )
    print("| mode | resolved p50 ms | resolved p95 ms | answer 200 p50 ms | answer 200 p95 ms |")
    print("|---|---:|---:|---:|---:|")
    for name, (resolved, answered) in samples.items():
        row = f"| {name} | {pct(resolved, 50):.2f} | {pct(resolved, 95):.2f} | "
        print(row + f"{pct(answered, 50):.2f} | {pct(answered, 95):.2f} |")
    print(
        "\nresolved = answer POST sent -> the run's stream (on A, C or S) delivers the elicitation-resolved chunk;"
        "\nanswer 200 = answer POST sent -> its 200 read (the POST runs concurrently with reading the stream)."
    )


if __name__ == "__main__":
    main()
