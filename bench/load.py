"""Load: N concurrent chats for T seconds, each round one tool call with one question answered at once.

Run:  uv run python bench/load.py [--chats 50] [--seconds 20] [--setups sqlite,redis2]

Per setup, the MRTR test server (tests/servers/mrtr_server.py) and the setup's hubs run as their own processes
(`elicithub serve`): "sqlite" is one hub on a SQLite file, "redis1" one hub on a Redis database, "redis2" two hubs on
one Redis database where every answer goes to the hub that did NOT run the chat. Each of the N chat clients loops for
T seconds: a streamed `POST /run/v1/chat/completions` with `/call mrtr.provision {"name": "orders"}` in a new
conversation, the answer POSTed to `/run/api/elicitation-responses` the moment the elicitation-request chunk is
parsed, the stream read to `[DONE]` and its text checked. Reported: round trips/s, latency percentiles (chat POST sent
-> `[DONE]`), errors, and the CPU seconds per round trip that each process used (its own /proc accounting: hubs, MCP
server, redis, this load generator). The clients use aiohttp, which costs less CPU per request than httpx, because
they share the machine's 2 cores with everything they measure. A setup named `+fast` runs its hubs with `--loop uvloop
--http httptools` (the `fast` extra), the others with `--loop asyncio --http h11`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from processes import (
    MRTR_SERVER,
    chat_chunk,
    cpu_seconds,
    free_port,
    pct,
    serve,
    spawn,
    start_redis,
    stop,
    wait_for_port,
)
from pyspy import record, summary

TOKEN = "alice-secret"
HEADERS = {"authorization": f"Bearer {TOKEN}", "x-supports-elicitation": "true"}
CHAT_BODY = {
    "model": "scripted",
    "stream": True,
    "messages": [{"role": "user", "content": '/call mrtr.provision {"name": "orders"}'}],
}
ANSWER = {"region": "eu-west-1"}
EXPECTED = "Provisioned orders in eu-west-1."

now = time.perf_counter


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


async def chat(
    http: aiohttp.ClientSession,
    chat_url: str,
    answer_url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> tuple[str, str, bool]:
    """One streamed chat POST read to `[DONE]`, its question answered at once through `answer_url`: the
    conversation id, the text, and whether it asked."""
    answering: asyncio.Task[None] | None = None
    text = ""
    async with http.post(f"{chat_url}/run/v1/chat/completions", json=body, headers=headers or {}) as response:
        if response.status != 200:
            raise RuntimeError(f"chat {response.status}")
        conversation_id = response.headers["x-conversation-id"]
        async for raw in response.content:
            chunk = chat_chunk(raw.decode().rstrip("\r\n"))
            if chunk is None:
                continue
            kind, value = chunk
            if kind == "done":
                break
            if kind == "text":
                text += value
            elif value["type"] == "elicitation-request":
                reply = {
                    "conversationId": conversation_id,
                    "elicitationId": value["elicitationId"],
                    "action": "accept",
                    "content": ANSWER,
                }
                answering = asyncio.create_task(answer(http, answer_url, reply))
    if answering is not None:
        await answering
    return conversation_id, text, answering is not None


async def one_round(http: aiohttp.ClientSession, chat_url: str, answer_url: str) -> None:
    """A chat round; raises with a short reason when anything is off."""
    _, text, asked = await chat(http, chat_url, answer_url, CHAT_BODY)
    if not asked:
        raise RuntimeError("never asked")
    if text != EXPECTED:
        raise RuntimeError(f"text {text[:60]!r}")


async def answer(http: aiohttp.ClientSession, answer_url: str, body: dict[str, Any]) -> None:
    async with http.post(f"{answer_url}/run/api/elicitation-responses", json=body) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"answer {response.status}")


async def chat_loop(
    index: int, hubs: list[str], until: float, tally: Tally, measuring: asyncio.Event, cross: bool
) -> None:
    chat_url = hubs[index % len(hubs)]
    answer_url = hubs[(index + 1) % len(hubs)] if cross else chat_url
    connector = aiohttp.TCPConnector(limit=4)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(headers=HEADERS, connector=connector, timeout=timeout) as http:
        while now() < until:
            t0 = now()
            try:
                await one_round(http, chat_url, answer_url)
            except Exception as exc:
                if measuring.is_set():
                    tally.error(str(exc) or type(exc).__name__)
                continue
            if measuring.is_set() and now() <= until:
                tally.latencies.append(now() - t0)


async def wait_healthy(url: str) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(300):
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"{url}/healthz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} is not healthy")


@dataclass
class Outcome:
    setup: str
    rounds: int
    seconds: float
    tally: Tally
    cpu: dict[str, float]


async def drive(
    setup: str, hubs: list[str], pids: dict[str, int], chats: int, seconds: float, warmup: float, profile: Path | None
) -> Outcome:
    for url in hubs:
        await wait_healthy(url)
    tally = Tally()
    measuring = asyncio.Event()
    start = now()
    until = start + warmup + seconds
    cross = len(hubs) > 1
    loops = [asyncio.create_task(chat_loop(i, hubs, until, tally, measuring, cross)) for i in range(chats)]
    await asyncio.sleep(warmup)
    measuring.set()
    pids = pids | {"load generator": os.getpid()}
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    samplers = []
    if profile is not None:
        hub_pids = {name: pid for name, pid in pids.items() if name.startswith("hub")}
        samplers = [
            record(pid, seconds, profile / f"{setup}-{name.replace(' ', '')}.txt") for name, pid in hub_pids.items()
        ]
    t0 = now()
    await asyncio.sleep(max(0.0, until - now()))
    elapsed = now() - t0
    after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    await asyncio.gather(*loops)
    for sampler in samplers:
        await asyncio.to_thread(sampler.wait)
    cpu = {name: after[name] - before[name] for name in pids}
    return Outcome(setup, len(tally.latencies), elapsed, tally, cpu)


def run_setup(
    setup: str, workdir: Path, chats: int, seconds: float, warmup: float, profile: Path | None, bare: bool
) -> Outcome:
    with contextlib.ExitStack() as running:
        mcp_port = free_port()
        mrtr = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / f"{setup}-mrtr.log")
        running.callback(stop, mrtr)
        wait_for_port(mcp_port, mrtr)
        pids = {"mcp server": mrtr.pid}
        config: dict[str, Any] = {
            "users": [{"id": "alice", "token": TOKEN}],
            "mcp_servers": [{"id": "mrtr", "url": f"http://127.0.0.1:{mcp_port}/mcp"}],
            "elicitation": {"timeout_s": 60},
        }
        processes: list[tuple[subprocess.Popen[bytes], int]] = []
        store, _, fast = setup.partition("+")
        options = ["--loop", "uvloop", "--http", "httptools"] if fast else ["--loop", "asyncio", "--http", "h11"]
        if bare:
            options = []
        if store == "sqlite":
            config["store"] = {"url": f"sqlite:///{workdir / f'{setup}.db'}"}
            processes.append(serve(workdir, f"hub-{setup}", config, options))
        elif store in ("redis1", "redis2"):
            redis, redis_port = start_redis(workdir)
            running.callback(stop, redis)
            pids["redis"] = redis.pid
            config["store"] = {"url": f"redis://127.0.0.1:{redis_port}/0"}
            processes += [serve(workdir, f"hub-{name}-{setup}", config, options) for name in "ab"[: int(store[-1])]]
        else:
            raise SystemExit(f"unknown setup {setup!r} (sqlite, redis1, redis2, each optionally +fast)")
        for i, (process, port) in enumerate(processes):
            running.callback(stop, process)
            wait_for_port(port, process)
            pids[f"hub {i + 1}" if len(processes) > 1 else "hub"] = process.pid
        hubs = [f"http://127.0.0.1:{port}" for _, port in processes]
        outcome = asyncio.run(drive(setup, hubs, pids, chats, seconds, warmup, profile))
        if outcome.tally.errors:  # what the hubs said about it, before their folder goes
            for log in sorted(workdir.glob(f"hub-*{setup}.log")):
                said = [line for line in log.read_text(errors="replace").splitlines() if ' HTTP/1.1" ' not in line]
                print(f"--- {log.name} (last lines but the access log's)", *said[-40:], sep="\n", file=sys.stderr)
        return outcome


def table(outcomes: list[Outcome]) -> Iterator[str]:
    yield (
        "| setup | round trips/s | p50 ms | p95 ms | p99 ms | errors "
        "| hub CPU ms / round trip | others' CPU ms / round trip |"
    )
    yield "|---|---:|---:|---:|---:|---:|---:|---|"
    for o in outcomes:
        n = max(o.rounds, 1)
        lat = o.tally.latencies
        hubs = sum(v for k, v in o.cpu.items() if k.startswith("hub"))
        each = " + ".join(f"{1000 * v / n:.2f}" for k, v in o.cpu.items() if k.startswith("hub"))
        hub_cell = f"{1000 * hubs / n:.2f}" + (f" ({each})" if o.setup.startswith("redis2") else "")
        others = ", ".join(f"{k} {1000 * v / n:.2f}" for k, v in o.cpu.items() if not k.startswith("hub"))
        errors = sum(o.tally.errors.values())
        yield (
            f"| {o.setup} | {o.rounds / o.seconds:.1f} | {pct(lat, 50):.1f} | {pct(lat, 95):.1f} | "
            f"{pct(lat, 99):.1f} | {errors} | {hub_cell} | {others} |"
        )
    for o in outcomes:
        for what, count in sorted(o.tally.errors.items()):
            yield f"\n{o.setup}: {count} x {what}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chats", type=int, default=50, help="concurrent chats (default 50)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per setup (default 20)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load before measuring (default 3)")
    parser.add_argument(
        "--setups",
        default="sqlite,sqlite+fast,redis2,redis2+fast",
        help="comma-separated: sqlite, redis1, redis2; +fast: the hubs on uvloop and httptools (else asyncio and h11)",
    )
    parser.add_argument("--profile", type=Path, help="sample each hub with py-spy into this folder and summarise")
    parser.add_argument(
        "--bare", action="store_true", help="start hubs without --loop/--http (an older hub that has no such options)"
    )
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)  # py-spy writes nothing (and says so to nobody) without it
    load = os.getloadavg()[0]
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="elicithub-load-") as tmp:
        for setup in args.setups.split(","):
            print(f"  {setup}: {args.chats} chats for {args.seconds:g} s ...", file=sys.stderr, flush=True)
            outcomes.append(run_setup(setup, Path(tmp), args.chats, args.seconds, args.warmup, args.profile, args.bare))
    print(
        f"{args.chats} concurrent chats, {args.seconds:g} s measured per setup after {args.warmup:g} s of warm-up; "
        f"1-minute load average {load:.2f} before, {os.getloadavg()[0]:.2f} after.\n"
    )
    print("\n".join(table(outcomes)))
    if args.profile is not None:
        for o in outcomes:
            for path in sorted(args.profile.glob(f"{o.setup}-*.txt")):
                print(f"\n### py-spy: {path.stem}, {o.rounds} round trips\n")
                print(summary(path, rounds=o.rounds // max(1, sum(k.startswith("hub") for k in o.cpu))))


if __name__ == "__main__":
    main()
