"""What it costs one process to hold many pending elicitations through `Broker.request`, and to expire them all.

Run:  uv run python bench/pending.py [--n 10000]

For each store (memory, SQLite file, Redis on a private redis-server) a fresh child process starts a Broker, starts
N `broker.request(...)` tasks whose elicitations share one deadline, and times until every one is stored and
published (N ElicitationRequested events seen). It then reports the memory held: RSS growth (VmRSS in /proc, after
gc) in one child, and tracemalloc's count of Python allocations in a second child (tracemalloc slows allocation, so
the times come from the first). At the deadline every waiter's timer fires and calls `end(EXPIRED)`; the expiry time
is the deadline -> the last request returned.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path
from typing import Any

from processes import start_redis, stop

from elicithub.core.broker import Broker
from elicithub.core.bus import EventBus
from elicithub.core.elicitation import Elicitation, utcnow
from elicithub.core.events import StreamEvent
from elicithub.store import open_backend

SCHEMA = {"type": "object", "properties": {"region": {"type": "string", "enum": ["eu", "us"]}}, "required": ["region"]}
HOLD_S = {"memory": 3.0, "sqlite": 8.0, "redis": 6.0}
"""Seconds from the start to the shared deadline for 10,000: enough to create them all on this machine (checked)."""

now = time.perf_counter


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class BusSink:
    """The broker's events, on an in-process bus keyed by run id (what the bench waits on)."""

    def __init__(self) -> None:
        self.bus: EventBus[StreamEvent] = EventBus()

    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
        self.bus.publish(elicitation.run_id, event)


async def child(store_url: str, n: int, hold_s: float, traced: bool) -> dict[str, Any]:
    backend = open_backend(store_url)
    store = backend.elicitations
    sink = BusSink()
    broker = Broker(store, sink)
    await broker.start()
    gc.collect()
    rss0 = rss_bytes()
    if traced:
        tracemalloc.start()
    t0, deadline = now(), utcnow() + timedelta(seconds=hold_s)
    async with sink.bus.subscribe("bench") as queue:
        tasks = [
            asyncio.create_task(
                broker.request(
                    Elicitation(
                        conversation_id=f"conv_{i}",
                        user_id="alice",
                        run_id="bench",
                        mode="form",
                        message="Which region?",
                        requested_schema=SCHEMA,
                        context={"trigger": "mcp_elicitation", "serverId": "deploy", "toolName": "provision"},
                        expires_at=deadline,
                    )
                )
            )
            for i in range(n)
        ]
        for _ in range(n):
            await queue.get()
        created = now() - t0
        gc.collect()
        held = {"rss": rss_bytes() - rss0, "pending_here": broker.pending_here()}
        if traced:
            current, peak = tracemalloc.get_traced_memory()
            held |= {"traced": current, "traced_peak": peak}
            tracemalloc.stop()
        if traced:
            # Only the memory counts here; end the waiters at once instead of waiting for the deadline.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await broker.close()
            await backend.close()
            return {"created_s": created, **held}
        if utcnow() >= deadline:
            raise RuntimeError(f"creating {n} took longer than the hold of {hold_s} s; pass a larger --hold-scale")
        results = await asyncio.gather(*tasks)
        expired = now() - (t0 + hold_s)
    outcomes = {r.outcome for r in results}
    due_left = len(await store.due(utcnow()))
    await broker.close()
    await backend.close()
    return {"created_s": created, "expired_s": expired, "outcomes": sorted(outcomes), "due_left": due_left, **held}


def run_child(store: str, url: str, n: int, hold_s: float, traced: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", url, "--n", str(n), "--hold", str(hold_s)]
    out = subprocess.run([*command, *(["--traced"] if traced else [])], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{store} child failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=10_000, help="pending elicitations held at once (default 10000)")
    parser.add_argument("--hold-scale", type=float, default=1.0, help="stretch the per-store deadlines (default 1)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--hold", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.n, args.hold, args.traced))))
        return
    started = now()
    rows = []
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp, contextlib.ExitStack() as running:
        workdir = Path(tmp)
        redis, redis_port = start_redis(workdir)
        running.callback(stop, redis)
        urls = {
            "memory": "memory://",
            "sqlite": f"sqlite:///{workdir / 'pending.db'}",
            "redis": f"redis://127.0.0.1:{redis_port}/0",
        }
        for store, url in urls.items():
            hold = HOLD_S[store] * args.hold_scale * args.n / 10_000
            plain = run_child(store, url, args.n, hold, traced=False)
            if store == "sqlite":
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{workdir / 'pending.db'}{suffix}").unlink(missing_ok=True)
            traced_url = url.replace("/0", "/1") if store == "redis" else url
            traced = run_child(store, traced_url, args.n, 600, traced=True)
            rows.append((store, plain, traced))
            print(f"  {store} done", file=sys.stderr, flush=True)
    print(f"N = {args.n} pending elicitations held at once in one process; {now() - started:.0f} s in all.\n")
    print(
        "| store | create all (s) | per request (µs) | RSS growth (MB) | per pending (KB RSS) "
        "| tracemalloc (MB) | per pending (KB traced) | expire all after the deadline (s) | outcomes |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for store, plain, traced in rows:
        print(
            f"| {store} | {plain['created_s']:.2f} | {1e6 * plain['created_s'] / args.n:.0f} "
            f"| {plain['rss'] / 2**20:.1f} | {plain['rss'] / args.n / 1024:.2f} "
            f"| {traced['traced'] / 2**20:.1f} | {traced['traced'] / args.n / 1024:.2f} "
            f"| {plain['expired_s']:.2f} | {', '.join(plain['outcomes'])} ({plain['due_left']} still due) |"
        )


if __name__ == "__main__":
    main()
