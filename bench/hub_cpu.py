"""The hub's CPU per question round trip with nothing else going on: one chat at a time, memory store, uvloop.

Run:  uv run python bench/hub_cpu.py [--n 300] [--warmup 20] [--pairs 3] [--before SRC] [--profile FILE]

One hub (`elicithub serve`, memory store, uvloop + httptools) in front of the MRTR test server; this process runs
`--n` chat rounds one after another (roundtrip.py's chat client: the chat POST, the question answered at once, read
to `[DONE]`) and reads the hub's CPU time from /proc before and after. With `--before SRC` (a `src/` unpacked apart)
it alternates that tree's hub and this one's, `--pairs` times, and prints the median of each: the other sessions
on the machine move single runs by 20 % and more. `--profile FILE` profiles this tree's hub over the measured
rounds with cProfile on process CPU time (not wall time, which a busy machine fills with waits) into FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
from pathlib import Path

from processes import MRTR_SERVER, cpu_seconds, free_port, spawn, stop, wait_for_port
from roundtrip import TOKEN, ThroughHub

HUB = """
import cProfile, os, signal, sys, time
from elicithub.cli import main
out = os.environ.get("HUB_PROFILE")
if out:
    profile = cProfile.Profile(time.process_time)
    def dump(*_):
        profile.disable()
        profile.dump_stats(out)
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
    signal.signal(signal.SIGUSR2, dump)
sys.argv[0] = "elicithub"
main()
"""
"""`elicithub serve`, with a profiler that SIGUSR1 starts and SIGUSR2 stops and writes (the warm-up is left out)."""


async def measure(workdir: Path, mcp_url: str, n: int, warmup: int, src: str | None, profile: str | None) -> float:
    """Hub CPU ms per round trip over `n` rounds, after a warm-up."""
    config = {
        "store": {"url": "memory://"},
        "users": [{"id": "alice", "token": TOKEN}],
        "mcp_servers": [{"id": "mrtr", "url": mcp_url}],
        "elicitation": {"timeout_s": 60},
    }
    (workdir / "hub.yaml").write_text(json.dumps(config))
    port = free_port()
    env = {"PYTHONPATH": src} if src else {}
    if profile:
        env["HUB_PROFILE"] = profile
    command = ["-c", HUB, "serve", "--config", str(workdir / "hub.yaml"), "--port", str(port)]
    hub = spawn([sys.executable, *command, "--loop", "uvloop", "--http", "httptools"], workdir / "hub.log", env)
    try:
        wait_for_port(port, hub)
        client = ThroughHub(f"http://127.0.0.1:{port}", "hub")
        await client.wait_ready()
        for _ in range(warmup):
            await client.round(None)
        if profile:
            hub.send_signal(signal.SIGUSR1)
        before = cpu_seconds(hub.pid)
        for _ in range(n):
            await client.round(None)
        used = cpu_seconds(hub.pid) - before
        if profile:
            hub.send_signal(signal.SIGUSR2)
            await asyncio.sleep(2)  # let it write the profile
        await client.http.aclose()
        return 1000 * used / n
    finally:
        stop(hub)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=300, help="measured rounds per run (default 300)")
    parser.add_argument("--warmup", type=int, default=20, help="rounds before measuring, per run (default 20)")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each tree, alternated (default 3)")
    parser.add_argument("--before", help="a src/ tree to compare with (put first on its hub's PYTHONPATH)")
    parser.add_argument("--profile", help="cProfile this tree's hub (process CPU time) into this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp:
        workdir = Path(tmp)
        mcp_port = free_port()
        mrtr = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / "mrtr.log")
        try:
            wait_for_port(mcp_port, mrtr)
            url = f"http://127.0.0.1:{mcp_port}/mcp"
            if args.profile:
                ms = await measure(workdir, url, args.n, args.warmup, None, args.profile)
                print(f"profiled: {ms:.2f} hub CPU ms per round trip (with the profiler's cost); {args.profile}")
                return
            trees = [("before", args.before), ("after", None)] if args.before else [("this tree", None)]
            runs: dict[str, list[float]] = {name: [] for name, _ in trees}
            for _ in range(args.pairs):
                for name, src in trees:
                    runs[name].append(await measure(workdir, url, args.n, args.warmup, src, None))
            for name, values in runs.items():
                shown = ", ".join(f"{v:.2f}" for v in values)
                print(f"{name}: median {statistics.median(values):.2f} hub CPU ms per round trip ({shown})")
        finally:
            stop(mrtr)


if __name__ == "__main__":
    asyncio.run(main())
