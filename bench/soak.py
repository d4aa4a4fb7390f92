"""A soak: two hubs on one shared store, Redis and then Postgres, under a steady mixed workload for a long while;
whether their resources stay flat, and whether anything was lost or answered twice.

Run:  uv run python bench/soak.py [--minutes 15] [--warmup-minutes 5] [--stores redis,postgres] [--rate 4]
      [--sample-s 15] [--retention-s 60] [--question-s 15] [--json FILE] [--logs DIR]

Per store, the MRTR test server (tests/servers/mrtr_server.py), the demo tracker behind its loopback OAuth server
(tests/auth/conftest.py's TrackerProcess) and two hubs (`elicithub serve`) run as their own processes, with the
store's own server. soak_rounds.py starts `--rate` rounds a second, each asked on one hub and answered on the other:
chats; questions answered, left to expire (`--question-s`), cancelled by their person, by a new message and by an
admin; approvals granted, denied and left to expire; reconnects, a UI message stream left at its question and read
again after the question's event id on the other hub; and, one after another beside them, sign-ins through the
OAuth server as a browser does (the tracker forgets every token before each). The hubs forget conversations, ended
questions, finished runs and audit records after `--retention-s`, so that the store reaches its steady size within
the warm-up; so do the things kept for a fixed while: a kept MCP session nobody uses (5 minutes), Redis's markers of
the batches of appends it stored (5 minutes) and the hubs' leases on the logs they read (90 s). Hence a warm-up of 5
minutes.

Every `--sample-s` it reads each hub's `/metrics` (RSS, open file descriptors, event-loop tasks) and the store's size
(Redis keys, Postgres rows); after the warm-up each must stay flat: the median of the last quarter of the samples
within 10 % of the first quarter's. soak_checks.py checks each round's records as it ends (its question ended once,
as it must; its run finished, each tool call answered once; an approval once in the audit) and, at the end, that no
run or question still waits and that the MCP server provisioned each accepted name once and no other. It prints a
markdown table per store; `--json FILE` writes the figures (tests/bench/test_soak.py reads them), `--logs DIR` keeps
the processes' logs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the `tests` package

import asyncpg
import httpx
import redis.asyncio as redis
from processes import MRTR_SERVER, free_port, serve, spawn, start_postgres, start_redis, stop, wait_for_port
from prometheus_client.parser import text_string_to_metric_families
from soak_checks import Checks
from soak_rounds import APPROVER, Workload

from elicithub.store import open_backend
from tests.auth.conftest import TRACKER_TOOLS, TrackerProcess
from tests.conftest import USERS

FLAT = 0.10
HUB_METRICS = {
    "process_resident_memory_bytes": ("RSS MB", 1 / 2**20),
    "process_open_fds": ("open fds", 1),
    "elicithub_event_loop_tasks": ("tasks", 1),
}

Sample = dict[str, float]
DETAIL = ("Redis keys ", "Postgres rows ")
"""The figures of one kind of key or one table, beside the totals."""


def hub_config(store_url: str, mrtr: str, tracker: str, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "store": {"url": store_url, "heartbeat_s": 2},
        "users": USERS,
        "admins": [APPROVER],
        "elicitation": {"timeout_s": args.question_s},
        "conversations": {"retention_s": args.retention_s},
        "audit": {"retention_s": args.retention_s},
        "approvals": [
            {
                "tools": ["mrtr.inventory"],
                "approvers": {"users": [APPROVER]},
                "timeout_s": args.question_s,
                "on_timeout": "deny",
            }
        ],
        "mcp_servers": [
            {"id": "mrtr", "url": mrtr},
            {"id": "tracker", "url": tracker, "credential_scope": "user", "tools": TRACKER_TOOLS},
        ],
    }


async def hub_sample(http: httpx.AsyncClient, hubs: list[str]) -> Sample:
    found: Sample = {}
    for n, hub in enumerate(hubs, 1):
        text = (await http.get(f"{hub}/metrics")).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in HUB_METRICS:
                    label, scale = HUB_METRICS[sample.name]
                    found[f"hub {n} {label}"] = sample.value * scale
    return found


def redis_size(url: str) -> Callable[[], Awaitable[Sample]]:
    """Redis's keys, and by kind (the first two parts of a key's name: `elicithub:run`)."""
    client = redis.Redis.from_url(url, decode_responses=True)

    async def size() -> Sample:
        kinds: Counter[str] = Counter()
        async for key in client.scan_iter(count=1000):
            kinds[f"Redis keys {':'.join(key.split(':')[:2])}"] += 1
        return {"Redis keys": float(sum(kinds.values())), **{k: float(n) for k, n in kinds.items()}}

    return size


def postgres_size(url: str) -> Callable[[], Awaitable[Sample]]:
    async def size() -> Sample:
        connection = await asyncpg.connect(url)
        try:
            tables = await connection.fetch("SELECT tablename FROM pg_tables WHERE tablename LIKE 'elicithub_%'")
            names = [t["tablename"] for t in tables]
            rows = {name: await connection.fetchval(f'SELECT count(*) FROM "{name}"') for name in names}
        finally:
            await connection.close()
        return {"Postgres rows": float(sum(rows.values())), **{f"Postgres rows {t}": float(n) for t, n in rows.items()}}

    return size


async def sampling(
    hubs: list[str], store_size: Callable[[], Awaitable[Sample]], every_s: float, seconds: float
) -> list[tuple[float, Sample]]:
    """(seconds since the start, sample) every `every_s` for `seconds`."""
    samples: list[tuple[float, Sample]] = []
    start = time.monotonic()
    # A connection per sample: a kept one idles about as long as the hub keeps it (uvicorn's 5 s), and a request on
    # one the hub is closing at that moment ends "Server disconnected without sending a response".
    no_keepalive = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=30, limits=no_keepalive) as http:
        while (at := time.monotonic() - start) <= seconds:
            samples.append((at, {**await hub_sample(http, hubs), **await store_size()}))
            await asyncio.sleep(max(0.0, start + len(samples) * every_s - time.monotonic()))
    return samples


def flatness(samples: list[tuple[float, Sample]], warmup_s: float) -> dict[str, dict[str, float]]:
    """Per figure, after the warm-up: the medians of the first and last quarters of the samples, the change between
    them, and the extremes."""
    after = [sample for at, sample in samples if at >= warmup_s]
    if not after:
        return {}
    quarter = max(1, len(after) // 4)
    figures = {}
    for name in dict.fromkeys(name for sample in after for name in sample):
        values = [sample.get(name, 0.0) for sample in after]
        base, end = statistics.median(values[:quarter]), statistics.median(values[-quarter:])
        change = (end - base) / base if base else 0.0
        figures[name] = {"base": base, "end": end, "change": change, "min": min(values), "max": max(values)}
    return figures


async def wait_ready(hubs: list[str], processes: list[subprocess.Popen[bytes]]) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        for hub, process in zip(hubs, processes, strict=True):
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"a hub exited with {process.returncode}")
                try:
                    if (await http.get(f"{hub}/readyz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)


async def soak(store: str, store_url: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    mrtr_port = free_port()
    mrtr = spawn([sys.executable, str(MRTR_SERVER), str(mrtr_port)], workdir / f"{store}-mrtr.log")
    tracker = TrackerProcess()
    hubs: list[subprocess.Popen[bytes]] = []
    try:
        wait_for_port(mrtr_port, mrtr)
        mrtr_base = f"http://127.0.0.1:{mrtr_port}"
        ports = [free_port(), free_port()]
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        # Hubs sharing a store share one public URL (a front door's): a sign-in's link and its OAuth callback go to
        # the first hub, whichever hub asked.
        config = {"public_url": urls[0], **hub_config(store_url, f"{mrtr_base}/mcp", tracker.url, args)}
        key = {"ELICITHUB_SECRET_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()}
        for n, port in enumerate(ports, 1):
            hubs.append(serve(workdir, f"{store}-hub{n}", config, ["--no-access-log"], key, port)[0])
        await wait_ready(urls, hubs)
        backend = open_backend(store_url)
        await backend.open()
        workload = Workload(urls, tracker.base, args.question_s)
        checks = Checks(backend, urls[0])
        checking = asyncio.create_task(checks.follow(workload.done))
        size = redis_size(store_url) if store == "redis" else postgres_size(store_url)
        seconds = args.minutes * 60
        sampled = asyncio.create_task(sampling(urls, size, args.sample_s, seconds))
        await workload.drive(seconds, args.rate)
        samples = await sampled
        await workload.done.join()  # every round that ended is checked
        checking.cancel()
        await checks.finish(mrtr_base, workload.tally)
        await workload.close()
        await checks.close()
        await backend.close()
        tally = workload.tally
        return {
            "store": store,
            "minutes": args.minutes,
            "rounds": dict(tally.finished),
            "started": sum(tally.started.values()),
            "finished": sum(tally.finished.values()),
            "errors": dict(tally.errors),
            "server_errors": tally.server_errors,
            "problems": dict(checks.problems),
            "lost": checks.count("lost") + sum(tally.errors.values()),
            "twice": checks.count("twice"),
            "wrong": checks.count("wrong"),
            "resources": flatness(samples, args.warmup_minutes * 60),
            "samples": samples,
        }
    finally:
        for process in hubs:
            stop(process)
        tracker.kill()
        stop(mrtr)


def report(result: dict[str, Any]) -> str:
    lines = [
        f"### {result['store']}: {result['minutes']:g} min, {result['finished']} of {result['started']} rounds "
        "ended as they must",
        "",
        "| figure | after warm-up | at the end | change | min | max | flat (10 %) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in result["resources"].items():
        flat = "yes" if abs(f["change"]) <= FLAT else "**no**"
        if name.startswith(DETAIL) and flat == "yes":
            continue  # a kind of key or a table: shown when it is what grows
        lines.append(
            f"| {name} | {f['base']:.1f} | {f['end']:.1f} | {100 * f['change']:+.1f} % | {f['min']:.1f} | "
            f"{f['max']:.1f} | {flat} |"
        )
    rounds = ", ".join(f"{kind} {n}" for kind, n in sorted(result["rounds"].items()))
    lines += [
        "",
        f"Rounds: {rounds}.",
        f"Lost: {result['lost']}; answered twice: {result['twice']}; ended otherwise than asked: {result['wrong']}; "
        f"5xx responses: {result['server_errors']}.",
    ]
    lines += [f"- error: {what} ({n})" for what, n in result["errors"].items()]
    lines += [f"- problem: {what} ({n})" for what, n in result["problems"].items()]
    return "\n".join(lines)


async def main(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    results = []
    for store in args.stores.split(","):
        if store == "redis":
            server, port = start_redis(workdir)
            folder = None
            url = f"redis://127.0.0.1:{port}/0"
        elif store == "postgres":
            server, url, folder = start_postgres()
        else:
            raise SystemExit(f"unknown store {store!r}: redis or postgres")
        try:
            result = await soak(store, url, args, workdir)
        finally:
            stop(server)
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        print(report(result), flush=True)
        print(flush=True)
        results.append(result)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--warmup-minutes", type=float, default=5)
    parser.add_argument("--stores", default="redis,postgres")
    parser.add_argument("--rate", type=float, default=4, help="rounds started a second")
    parser.add_argument("--sample-s", type=float, default=15)
    parser.add_argument("--retention-s", type=float, default=60)
    parser.add_argument("--question-s", type=float, default=15)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--logs", help="keep the processes' logs in this folder")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elicithub-soak-") as tmp:
        logs = Path(arguments.logs or tmp)
        logs.mkdir(parents=True, exist_ok=True)
        figures = asyncio.run(main(arguments, logs))
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(figures, indent=1))
