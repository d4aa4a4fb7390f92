"""How long a hub takes to start: the CPU of `import elicithub.server.app`, and the CPU and wall time of
`elicithub serve` from its launch until `/readyz` answers 200.

Run:  uv run python bench/start.py [--n 5] [--store sqlite|memory] [--mcp-servers 1] [--before SRC] [--no-bytecode]

Each start is a fresh `elicithub serve` in a temp dir of its own (the store there, the key in the environment, no
Slack, telemetry or demo), stopped with SIGTERM once ready; its CPU (user + system, /proc) is read at that moment.
Its config lists `--mcp-servers` downstream MCP servers (one by default, as issue 45's target has), all at a
listener in this process that counts the connections it gets: the table says whether the hub contacted them
before it was ready. Once ready, each protocol surface gets its first request, then a second (an MCP `initialize`,
the A2A agent card, an AG-UI run with no input): a surface built by its first request imports its SDK then.
Prints the medians of N.

`--before SRC` measures another tree too (its `src` first on PYTHONPATH, e.g. `git archive main src | tar -x -C
/tmp/before`), one start of each tree in turn, so that both see the same load. Imports are timed as a deployed hub
makes them, from bytecode (the container image compiles it; one import per tree first writes what is missing);
`--no-bytecode` times them compiled from source instead, as a checkout run with PYTHONDONTWRITEBYTECODE set does.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from processes import cpu_seconds, elicithub_command, free_port, stop

READY_WITHIN_S = 120.0
IMPORT = (
    "import resource; import elicithub.server.app; r = resource.getrusage(resource.RUSAGE_SELF); "
    "print(r.ru_utime + r.ru_stime)"
)


class Listener(socketserver.ThreadingTCPServer):
    """Where the config's MCP servers are: it counts the connections it gets, and closes each at once."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), socketserver.BaseRequestHandler)
        self.contacts = 0

    def process_request(self, request: object, client_address: object) -> None:
        self.contacts += 1
        self.shutdown_request(request)


@dataclass
class Tree:
    """A source tree measured: its name in the table, its `src` (None: the installed one), and its figures."""

    name: str
    src: str | None
    imports: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    contacts: int = 0
    requests: dict[str, list[float]] = field(default_factory=dict)
    """By request (`first ...`, `second ...`): its wall times, and the hub's CPU for each round of them."""


@dataclass(frozen=True)
class Start:
    cpu: float
    wall: float
    contacts: int
    requests: dict[str, float]


TOKEN = "bench-token"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}
SURFACES = {
    "MCP `initialize`": ("POST", "/mcp", INITIALIZE, {"accept": "application/json, text/event-stream"}, 200),
    "A2A agent card": ("GET", "/.well-known/agent-card.json", None, {}, 200),
    "AG-UI run with no input (422)": ("POST", "/run/agui", {}, {}, 422),
}
"""A request to each protocol surface: method, path, JSON body, headers, the status it must get."""


def environment(tree: Tree, no_bytecode: Path | None) -> dict[str, str]:
    """This process's environment, with telemetry off, `tree`'s src first on the path, and bytecode read from the
    trees (written where missing) or, with `no_bytecode`, from an empty cache nothing is written to."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "PYTHONDONTWRITEBYTECODE"}
    if tree.src is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree.src, *filter(None, [os.environ.get("PYTHONPATH")])])
    if no_bytecode is not None:
        env["PYTHONPYCACHEPREFIX"] = str(no_bytecode)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def import_cpu(env: dict[str, str]) -> float:
    """CPU seconds of a fresh interpreter importing the app module (the interpreter's own start included)."""
    done = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True, check=True, env=env)
    return float(done.stdout.strip())


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError):
        return False


def timed(url: str, method: str, body: object, headers: dict[str, str], status: int) -> float:
    """Wall seconds of one request, which must get `status`."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json", **headers}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=READY_WITHIN_S) as response:
            response.read()
            got = response.status
    except urllib.error.HTTPError as exc:
        got = exc.code
    if got != status:
        raise RuntimeError(f"{method} {url}: {got}, not {status}")
    return time.perf_counter() - t0


def one_start(store: str, servers: int, env: dict[str, str], listener: Listener) -> Start:
    """One `elicithub serve`: its CPU and wall seconds until /readyz is 200, the connections its MCP servers got
    meanwhile, then the wall time of each surface's first and second request."""
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-start-") as tmp:
        workdir = Path(tmp)
        url = f"sqlite:///{workdir}/hub.db" if store == "sqlite" else "memory://"
        address = f"http://127.0.0.1:{listener.server_address[1]}/mcp"
        config = {
            "store": {"url": url},
            "mcp_servers": [{"id": f"s{i}", "url": address} for i in range(servers)],
            "users": [{"id": "bench", "token": TOKEN}],
        }
        path = workdir / "hub.yaml"
        path.write_text(json.dumps(config))  # JSON is YAML
        port = free_port()
        env = {**env, "ELICITHUB_SECRET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")}
        command = [*elicithub_command(), "serve", "--config", str(path), "--port", str(port)]
        contacts = listener.contacts
        with (workdir / "hub.log").open("wb") as log:
            t0 = time.perf_counter()
            process = subprocess.Popen(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            while not ready(f"http://127.0.0.1:{port}"):
                if process.poll() is not None:
                    raise RuntimeError(f"the hub exited with {process.returncode}: {(workdir / 'hub.log').read_text()}")
                if time.perf_counter() - t0 > READY_WITHIN_S:
                    raise RuntimeError(f"not ready within {READY_WITHIN_S:g} s")
                time.sleep(0.01)
            wall = time.perf_counter() - t0
            cpu = cpu_seconds(process.pid)
            contacted = listener.contacts - contacts
            requests = {}
            for order in ("first", "second"):
                before = cpu_seconds(process.pid)
                for name, (method, path, body, headers, status) in SURFACES.items():
                    url = f"http://127.0.0.1:{port}{path}"
                    requests[f"{order} {name}, wall"] = timed(url, method, body, headers, status)
                requests[f"{order} three requests, the hub's CPU"] = cpu_seconds(process.pid) - before
        finally:
            stop(process)
        return Start(cpu, wall, contacted, requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5, help="starts to take the median of")
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--mcp-servers", type=int, default=1, help="downstream MCP servers in the config")
    parser.add_argument("--before", help="another tree's src directory, measured in turn with this one")
    parser.add_argument("--no-bytecode", action="store_true", help="compile every module from source")
    args = parser.parse_args()
    trees = [Tree("before", args.before)] if args.before else []
    trees.append(Tree("after" if args.before else "this tree", None))
    listener = Listener()
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-pycache-") as cache:
        envs = {tree.name: environment(tree, Path(cache) if args.no_bytecode else None) for tree in trees}
        for tree in trees:
            import_cpu(envs[tree.name])  # writes the tree's missing bytecode first (unless --no-bytecode)
        for _ in range(args.n):
            for tree in trees:
                tree.imports.append(import_cpu(envs[tree.name]))
                start = one_start(args.store, args.mcp_servers, envs[tree.name], listener)
                tree.cpu.append(start.cpu)
                tree.wall.append(start.wall)
                tree.contacts += start.contacts
                for name, seconds in start.requests.items():
                    tree.requests.setdefault(name, []).append(seconds)
            loads.append(os.getloadavg()[0])
    listener.shutdown()
    bytecode = "compiled from source" if args.no_bytecode else "from bytecode"
    print(
        f"Medians of {args.n}, store {args.store}, {args.mcp_servers} MCP server(s), imports {bytecode}, "
        f"1-min load {min(loads):.1f}-{max(loads):.1f}:\n"
    )
    print("| measurement | " + " | ".join(tree.name for tree in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    rows = {
        "`import elicithub.server.app`, CPU (user + system)": [t.imports for t in trees],
        "`elicithub serve` until /readyz is 200, CPU (user + system)": [t.cpu for t in trees],
        "`elicithub serve` until /readyz is 200, wall": [t.wall for t in trees],
    }
    for name, values in rows.items():
        print(f"| {name} | " + " | ".join(f"{statistics.median(v):.2f} s" for v in values) + " |")
    print("| connections to the MCP servers before ready | " + " | ".join(str(t.contacts) for t in trees) + " |")
    for name in trees[0].requests:
        cells = " | ".join(f"{statistics.median(t.requests[name]) * 1000:.0f} ms" for t in trees)
        print(f"| then the {name} | {cells} |")


if __name__ == "__main__":
    main()
