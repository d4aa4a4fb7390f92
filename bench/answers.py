"""Answers per second through `POST /run/api/elicitation-responses`, with one hub and with two sharing Redis.

Run:  uv run python bench/answers.py [--n 4000] [--pending 10000] [--clients 32] [--fast] [--profile DIR]

For each setup, `--pending` elicitations for user alice are put straight into the store from this process (the hubs
have no waiter for them, so each answer is: auth, body parse, lookup, content check against the schema, the
store's compare-and-set, the 200), and N of them are answered while the rest stay pending. Then `--clients`
concurrent httpx.AsyncClients (one keep-alive connection each, spread evenly over the setup's hubs) answer them
all as fast as they can, each its own share in turn. Reported:
answers/s over the whole burst, per-answer latency, and the CPU seconds each process used during the burst (this
machine has 2 cores, shared by the load generator, the hubs and redis-server), and the hubs' CPU per answer, which
is what bounds a hub on a core of its own. Hubs are `elicithub serve` (`--fast`: on uvloop and httptools). With
`--profile DIR` each answering hub is sampled by py-spy during its burst and pyspy.py summarises where its CPU went.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from processes import cpu_seconds, machine_ticks, pct, serve, shares, start_redis, stop, wait_for_port
from pyspy import record, summary

from elicithub.core.elicitation import State, new_elicitation
from elicithub.store import open_backend

TOKEN = "alice-secret"
SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "enum": ["eu", "us"]},
        "replicas": {"type": "integer", "minimum": 1},
    },
    "required": ["region"],
}

now = time.perf_counter


async def put_pending(store_url: str, n: int) -> list[tuple[str, str]]:
    """Put n pending elicitations for alice straight into the store; returns their (conversation, id) pairs."""
    backend = open_backend(store_url)
    store = backend.elicitations
    ids = []
    try:
        for i in range(n):
            e = new_elicitation(
                conversation_id=f"conv_{i}",
                user_id="alice",
                run_id=f"run_{i}",
                mode="form",
                message="Which region?",
                requested_schema=SCHEMA,
                timeout_s=600,
            )
            await store.put(e)
            ids.append((e.conversation_id, e.id))
    finally:
        await backend.close()
    return ids


async def answer_all(hubs: list[str], ids: list[tuple[str, str]], clients: int) -> tuple[float, list[float]]:
    """Answer every one through the hubs' HTTP endpoint; returns the wall time and each answer's latency."""
    latencies: list[float] = []

    async def answer_mine(client: httpx.AsyncClient, mine: list[tuple[str, str]]) -> None:
        for conversation_id, eid in mine:
            body = {
                "conversationId": conversation_id,
                "elicitationId": eid,
                "action": "accept",
                "content": {"region": "eu", "replicas": 2},
            }
            t0 = now()
            response = await client.post("/run/api/elicitation-responses", json=body)
            latencies.append(now() - t0)
            if response.status_code != 200:
                raise RuntimeError(f"{response.status_code} {response.text}")

    open_clients = [
        httpx.AsyncClient(
            base_url=hubs[k % len(hubs)],
            headers={"authorization": f"Bearer {TOKEN}"},
            limits=httpx.Limits(max_connections=1),
            timeout=30,
        )
        for k in range(clients)
    ]
    try:
        for client in open_clients:
            await client.get("/healthz")  # connected before the clock starts
        t0 = now()
        await asyncio.gather(*(answer_mine(c, ids[k::clients]) for k, c in enumerate(open_clients)))
        elapsed = now() - t0
    finally:
        for client in open_clients:
            await client.aclose()
    return elapsed, latencies


async def check_all_accepted(store_url: str, ids: list[str]) -> None:
    backend = open_backend(store_url)
    try:
        for eid in ids:
            stored = await backend.elicitations.get(eid)
            if stored is None or stored.state is not State.ACCEPTED:
                raise RuntimeError(f"{eid} is not accepted: {stored}")
    finally:
        await backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=4000, help="elicitations answered per setup (default 4000)")
    parser.add_argument("--pending", type=int, default=10_000, help="questions pending per setup (default 10000)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent HTTP clients (default 32)")
    parser.add_argument("--fast", action="store_true", help="hubs on uvloop and httptools (the fast extra)")
    parser.add_argument("--profile", type=Path, help="sample the answering hubs with py-spy into this folder")
    args = parser.parse_args()
    pending = max(args.pending, args.n)
    options = ["--loop", "uvloop", "--http", "httptools"] if args.fast else []
    started, load_before = now(), os.getloadavg()[0]
    rows: list[tuple[str, float, list[float], dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp, contextlib.ExitStack() as running:
        workdir = Path(tmp)
        redis, redis_port = start_redis(workdir)
        running.callback(stop, redis)
        config: dict[str, Any] = {"users": [{"id": "alice", "token": TOKEN}], "elicitation": {"timeout_s": 600}}
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        sqlite_url = f"sqlite:///{workdir / 'answers.db'}"
        setups = {
            "sqlite, 1 hub": (sqlite_url, ["s"]),
            "redis, 1 hub": (redis_url, ["r1"]),
            "redis, 2 hubs": (redis_url, ["r1", "r2"]),
        }
        processes = {}
        for name, url in (("s", sqlite_url), ("r1", redis_url), ("r2", redis_url)):
            process, port = serve(workdir, name, config | {"store": {"url": url}}, options)
            running.callback(stop, process)
            processes[name] = (process, port)
        for process, port in processes.values():
            wait_for_port(port, process)
        pids = {"bench": os.getpid(), "redis-server": redis.pid} | {k: p.pid for k, (p, _) in processes.items()}
        for setup, (url, names) in setups.items():
            hubs = [f"http://127.0.0.1:{processes[name][1]}" for name in names]
            ids = asyncio.run(put_pending(url, pending))[: args.n]
            cpu0, machine0 = {k: cpu_seconds(pid) for k, pid in pids.items()}, machine_ticks()
            samplers = []
            if args.profile is not None:
                args.profile.mkdir(parents=True, exist_ok=True)
                for name in names:
                    out = args.profile / f"{setup.replace(', ', '-').replace(' ', '')}-{name}.txt"
                    samplers.append((out, record(pids[name], 600, out)))
            elapsed, latencies = asyncio.run(answer_all(hubs, ids, args.clients))
            for out, sampler in samplers:
                sampler.send_signal(signal.SIGINT)  # py-spy writes what it has and exits
                sampler.wait()
                print(f"\n### {out.name}\n\n{summary(out, rounds=args.n // len(samplers))}\n", file=sys.stderr)
            cpu = {k: cpu_seconds(pid) - cpu0[k] for k, pid in pids.items()}
            machine = shares(machine0, machine_ticks())
            others = machine["busy s"] - sum(cpu.values())
            cpu |= {"others": others, "idle %": machine["idle"], "steal %": machine["steal"]}
            asyncio.run(check_all_accepted(url, [eid for _, eid in ids]))
            rows.append((setup, elapsed, latencies, cpu))
            print(f"  {setup}: {args.n / elapsed:.0f} answers/s", file=sys.stderr, flush=True)
    print(
        f"N = {args.n} answers per setup with {pending} pending, {args.clients} concurrent clients"
        f"{', hubs on uvloop + httptools' if args.fast else ''}, {now() - started:.0f} s in all; "
        f"1-minute load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after.\n"
    )
    print(
        "| setup | answers/s | p50 ms | p95 ms | hub CPU ms / answer | CPU s: clients | hubs | redis | the rest "
        "| idle % | steal % |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for setup, elapsed, latencies, cpu in rows:
        hubs_cpu = " + ".join(f"{cpu[k]:.1f}" for k in ("s", "r1", "r2") if cpu[k] >= 0.05)
        print(
            f"| {setup} | {args.n / elapsed:.0f} | {pct(latencies, 50):.2f} | {pct(latencies, 95):.2f} "
            f"| {1000 * sum(cpu[k] for k in ('s', 'r1', 'r2')) / args.n:.2f} "
            f"| {cpu['bench']:.1f} | {hubs_cpu} | {cpu['redis-server']:.1f} | {cpu['others']:.1f} "
            f"| {cpu['idle %']:.0f} | {cpu['steal %']:.0f} |"
        )
    print("\nCPU s = user + system seconds each process used from the first answer sent to the last 200;")
    print("the rest = the machine's busy CPU seconds then (/proc/stat) minus those, i.e. every other process and the")
    print("kernel; idle % and steal % = shares of the whole machine's CPU time (both cores) then.")


if __name__ == "__main__":
    main()
