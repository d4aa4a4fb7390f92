"""What a waiting run holds: the Python objects per waiting question, by where they were allocated (tracemalloc).

Run:  uv run python bench/holds.py [--n 300] [--top 12]

A hub runs in this process (uvicorn in a thread, a SQLite file, the MRTR test server as a subprocess); after a
warm-up, tracemalloc starts and N chats each pause on one question with their streams closed (so the client keeps
nothing). The traced size per question is printed, then the allocation sites holding the most, each with the
innermost frames of its traceback. bench/memory.py measures the same as RSS in a separate hub process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import aiohttp
import uvicorn
from memory import HEADERS, TOKEN, ask
from processes import MRTR_SERVER, free_port, spawn, stop, wait_for_port

from elicithub.config import parse_config
from elicithub.server.app import create_app
from elicithub.server.hub import Hub

FRAMES = 6
SETTLE_S = 2.0


def short(frame: tracemalloc.Frame) -> str:
    path = frame.filename
    for marker in ("site-packages/", "/src/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{frame.lineno}"


async def chats(url: str, n: int) -> None:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(headers=HEADERS, connector=connector) as http:
        await ask(http, url, n, 32, keep_open=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=300, help="questions left waiting (default 300)")
    parser.add_argument("--top", type=int, default=12, help="allocation sites shown (default 12)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp:
        workdir = Path(tmp)
        mcp_port, port = free_port(), free_port()
        mrtr = spawn([sys.executable, str(MRTR_SERVER), str(mcp_port)], workdir / "mrtr.log")
        try:
            wait_for_port(mcp_port, mrtr)
            config = parse_config(
                {
                    "users": [{"id": "alice", "token": TOKEN}],
                    "store": {"url": f"sqlite:///{workdir / 'holds.db'}"},
                    "secrets": {"key_file": str(workdir / "secret.key")},
                    "elicitation": {"timeout_s": 3600},
                    "mcp_servers": [{"id": "mrtr", "url": f"http://127.0.0.1:{mcp_port}/mcp"}],
                }
            )
            app = create_app(config, Hub(config, instance="holds"))
            server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
            threading.Thread(target=server.run, daemon=True).start()
            wait_for_port(port, mrtr)
            url = f"http://127.0.0.1:{port}"
            asyncio.run(chats(url, 10))  # warm: tool list, downstream sessions, code paths
            time.sleep(SETTLE_S)
            tracemalloc.start(25)
            asyncio.run(chats(url, args.n))
            time.sleep(SETTLE_S)
            gc.collect()
            snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
            server.should_exit = True
        finally:
            stop(mrtr)
    sites = snapshot.statistics("traceback")
    total = sum(site.size for site in sites)
    print(f"N = {args.n} waiting questions, streams closed: {total / args.n / 1024:.1f} KB traced per question\n")
    print("| bytes / question | blocks / question | allocated at (innermost last) |")
    print("|---:|---:|---|")
    for site in sites[: args.top]:
        where = " < ".join(short(frame) for frame in reversed(site.traceback[-FRAMES:]))
        print(f"| {site.size / args.n:.0f} | {site.count / args.n:.1f} | {where} |")


if __name__ == "__main__":
    main()
