"""How long a hub takes to start: the CPU of `import elicithub.server.app`, and the CPU and wall time of
`elicithub serve` from its launch until `/readyz` answers 200.

Run:  uv run python bench/start.py [--n 5] [--store sqlite|memory] [--mcp-servers 1] [--before SRC] [--no-bytecode]

Each start is a fresh `elicithub serve` in a temp dir of its own (the store there, the key in the environment, no
Slack, telemetry or demo), stopped with SIGTERM once ready; its CPU (user + system, /proc) is read at that moment.
Its config lists `--mcp-servers` downstream MCP servers (one by default, as issue 45's target has), all at a
listener in this process that counts the connections it gets: the table says whether the hub contacted them
before it was ready. Prints the medians of N.

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


def one_start(store: str, servers: int, env: dict[str, str], listener: Listener) -> tuple[float, float, int]:
    """CPU seconds and wall seconds of one `elicithub serve` until /readyz is 200, and the connections its MCP
    servers got meanwhile."""
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-start-") as tmp:
        workdir = Path(tmp)
        url = f"sqlite:///{workdir}/hub.db" if store == "sqlite" else "memory://"
        address = f"http://127.0.0.1:{listener.server_address[1]}/mcp"
        config = {"store": {"url": url}, "mcp_servers": [{"id": f"s{i}", "url": address} for i in range(servers)]}
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
        finally:
            stop(process)
        return cpu, wall, contacted


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
                cpu, wall, contacted = one_start(args.store, args.mcp_servers, envs[tree.name], listener)
                tree.cpu.append(cpu)
                tree.wall.append(wall)
                tree.contacts += contacted
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


if __name__ == "__main__":
    main()
