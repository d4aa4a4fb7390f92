"""Long conversations: the cost of one question round trip in conversations that already have 1, 50 and 200 turns.

Run:  uv run python bench/long.py [--turns 1,50,200] [--n 200] [--concurrency 8] [--stores sqlite,redis]
      [--settle 3] [--cold]

Per store, the MRTR test server (tests/servers/mrtr_server.py) and one hub (`elicithub serve`) run as their own
processes. For each conversation length T, N conversations are seeded (not measured) by one streamed
`POST /run/v1/chat/completions` each whose `messages` carry T-1 earlier turns (each turn the four messages of one
answered tool call: the user's `/call`, the assistant's tool call, the tool's result, the assistant's text) and
a last user message, which the hub answers. Each of those conversations then takes one measured round trip
(`x-conversation-id`): `/call mrtr.provision {"name": "orders"}`, its question answered at once through
`POST /run/api/elicitation-responses`, the stream read to `[DONE]` and its text checked, C conversations at a time.
By default C conversations are seeded and then measured, batch after batch, as a person's next message follows
the last (the hub still holds the messages it wrote); `--cold` seeds all N first, so the hub holds the messages of
only the last few and reads the others' from the store. Reported per length: the round trips' p50/p95 latency
(chat POST sent -> `[DONE]`), the hub's CPU per round trip (its /proc accounting over the measuring only), and
both against the first length. Issue 25 asks that the three lengths cost within 10 % of each other.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from load import EXPECTED, HEADERS, TOKEN, wait_healthy
from load import chat as chat_round
from processes import (
    MRTR_SERVER,
    cpu_seconds,
    free_port,
    pct,
    serve,
    spawn,
    start_redis,
    stop,
    wait_for_port,
)

CALL = '/call mrtr.provision {"name": "orders"}'
now = time.perf_counter


def turn(i: int) -> list[dict[str, Any]]:
    """One earlier turn as an OpenAI client sends it back: an answered tool call and the model's words on it."""
    call_id = f"call_seed_{i}"
    arguments = json.dumps({"name": f"orders-{i}"})
    return [
        {"role": "user", "content": CALL},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "mrtr.provision", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f"Provisioned orders-{i} in eu-west-1."},
        {"role": "assistant", "content": f"Provisioned orders-{i} in eu-west-1."},
    ]


async def chat(
    http: aiohttp.ClientSession, url: str, messages: list[dict[str, Any]], conversation_id: str | None
) -> tuple[str, str]:
    """One streamed chat POST read to `[DONE]`, any question answered at once: the conversation id and the text."""
    headers = {} if conversation_id is None else {"x-conversation-id": conversation_id}
    body = {"model": "scripted", "stream": True, "messages": messages}
    conversation, text, _ = await chat_round(http, url, url, body, headers)
    return conversation, text


@dataclass
class Row:
    store: str
    turns: int
    latencies: list[float]
    hub_cpu_s: float


@dataclass(frozen=True)
class Plan:
    lengths: list[int]
    n: int
    concurrency: int
    settle_s: float
    """Between seeding and measuring: the hub's store finishes with the seeded rows (SQLite copies its WAL back
    into the database file on a thread of the hub's process) before its CPU is counted."""
    cold: bool
    """Seed all N conversations before measuring any (the hub holds the messages of only the last few it wrote);
    else `concurrency` at a time, each measured right after its seeding, as a person's next message follows."""


async def length(http: aiohttp.ClientSession, url: str, hub_pid: int, turns: int, plan: Plan) -> Row:
    history = [message for i in range(turns - 1) for message in turn(i)]
    gate = asyncio.Semaphore(plan.concurrency)
    latencies: list[float] = []

    async def seed(_: int) -> str:
        async with gate:
            conversation_id, _text = await chat(http, url, [*history, {"role": "user", "content": "hello"}], None)
            return conversation_id

    async def measured(conversation_id: str) -> None:
        async with gate:
            t0 = now()
            _, text = await chat(http, url, [{"role": "user", "content": CALL}], conversation_id)
            latencies.append(now() - t0)
            if text != EXPECTED:
                raise RuntimeError(f"text {text[:80]!r}")

    cpu_s = 0.0
    batch = plan.n if plan.cold else plan.concurrency
    for start in range(0, plan.n, batch):
        conversations = await asyncio.gather(*(seed(i) for i in range(start, min(start + batch, plan.n))))
        await asyncio.sleep(plan.settle_s)
        before = cpu_seconds(hub_pid)
        await asyncio.gather(*(measured(c) for c in conversations))
        cpu_s += cpu_seconds(hub_pid) - before
    return Row("", turns, latencies, cpu_s)


async def drive(url: str, hub_pid: int, store: str, plan: Plan) -> list[Row]:
    await wait_healthy(url)
    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=plan.concurrency * 2)
    async with aiohttp.ClientSession(headers=HEADERS, connector=connector, timeout=timeout) as http:
        await chat(http, url, [{"role": "user", "content": CALL}], None)  # warm: connect the server, load the code
        rows = []
        for turns in plan.lengths:
            print(f"  {store}: {plan.n} round trips after {turns} turns ...", file=sys.stderr, flush=True)
            row = await length(http, url, hub_pid, turns, plan)
            rows.append(Row(store, row.turns, row.latencies, row.hub_cpu_s))
        return rows


def run_store(store: str, workdir: Path, plan: Plan) -> list[Row]:
    with contextlib.ExitStack() as running:
        mcp_port = free_port()
        mrtr = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / f"{store}-mrtr.log")
        running.callback(stop, mrtr)
        wait_for_port(mcp_port, mrtr)
        config: dict[str, Any] = {
            "users": [{"id": "alice", "token": TOKEN}],
            "mcp_servers": [{"id": "mrtr", "url": f"http://127.0.0.1:{mcp_port}/mcp"}],
            "elicitation": {"timeout_s": 60},
        }
        if store == "sqlite":
            config["store"] = {"url": f"sqlite:///{workdir / 'long.db'}"}
        elif store == "redis":
            redis, redis_port = start_redis(workdir)
            running.callback(stop, redis)
            config["store"] = {"url": f"redis://127.0.0.1:{redis_port}/0"}
        else:
            raise SystemExit(f"unknown store {store!r} (sqlite, redis)")
        hub, port = serve(workdir, f"hub-{store}", config, ["--loop", "asyncio", "--http", "h11"])
        running.callback(stop, hub)
        wait_for_port(port, hub)
        return asyncio.run(drive(f"http://127.0.0.1:{port}", hub.pid, store, plan))


def table(rows: list[Row]) -> Iterator[str]:
    yield "| store | turns before | round trips | p50 ms | p95 ms | hub CPU ms / round trip | p50 vs 1st | CPU vs 1st |"
    yield "|---|---:|---:|---:|---:|---:|---:|---:|"
    first: dict[str, Row] = {}
    for row in rows:
        base = first.setdefault(row.store, row)
        n = max(len(row.latencies), 1)
        cpu, base_cpu = 1000 * row.hub_cpu_s / n, 1000 * base.hub_cpu_s / max(len(base.latencies), 1)
        p50, base_p50 = pct(row.latencies, 50), pct(base.latencies, 50)
        yield (
            f"| {row.store} | {row.turns} | {len(row.latencies)} | {p50:.1f} | {pct(row.latencies, 95):.1f} | "
            f"{cpu:.2f} | {p50 / base_p50:.2f}x | {cpu / base_cpu:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", default="1,50,200", help="comma-separated conversation lengths (default 1,50,200)")
    parser.add_argument("--n", type=int, default=200, help="measured round trips per length (default 200)")
    parser.add_argument("--concurrency", type=int, default=8, help="round trips at a time (default 8)")
    parser.add_argument("--stores", default="sqlite", help="comma-separated: sqlite, redis (default sqlite)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between seeding and measuring (default 3)")
    parser.add_argument("--cold", action="store_true", help="seed all N conversations before measuring any")
    args = parser.parse_args()
    plan = Plan([int(t) for t in args.turns.split(",")], args.n, args.concurrency, args.settle, args.cold)
    load = os.getloadavg()[0]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="elicithub-long-") as tmp:
        for store in args.stores.split(","):
            rows += run_store(store, Path(tmp), plan)
    print(
        f"{args.n} round trips per length, {args.concurrency} at a time, "
        f"{'all seeded first' if args.cold else 'each right after its seeding'}, hubs on asyncio + h11; "
        f"1-minute load average {load:.2f} before, {os.getloadavg()[0]:.2f} after.\n"
    )
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
