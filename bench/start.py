"""How long a hub takes to start: the CPU of `import elicithub.server.app`, and the CPU and wall time of
`elicithub serve` from its launch until `/readyz` answers 200.

Run:  uv run python bench/start.py [--n 5] [--store sqlite|memory]

Each start is a fresh `elicithub serve` in a temp dir of its own (the store there, the key in the environment, no
Slack, telemetry or demo), stopped with SIGTERM once ready; its CPU (user + system, /proc) is read at that moment.
Prints the medians of N. Put an older tree's `src` first on PYTHONPATH to measure it the same way.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from processes import cpu_seconds, elicithub_command, free_port, stop

READY_WITHIN_S = 120.0
IMPORT = "import resource; import elicithub.server.app; print(resource.getrusage(resource.RUSAGE_SELF).ru_utime)"


def import_cpu() -> float:
    """User CPU seconds of a fresh interpreter importing the app module (the interpreter's own start included)."""
    done = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError):
        return False


def one_start(store: str) -> tuple[float, float]:
    """CPU seconds and wall seconds of one `elicithub serve` until /readyz is 200."""
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-start-") as tmp:
        workdir = Path(tmp)
        url = f"sqlite:///{workdir}/hub.db" if store == "sqlite" else "memory://"
        config = workdir / "hub.yaml"
        config.write_text(json.dumps({"store": {"url": url}}))  # JSON is YAML
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env["ELICITHUB_SECRET_KEY"] = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
        command = [*elicithub_command(), "serve", "--config", str(config), "--port", str(port)]
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
        finally:
            stop(process)
        return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5, help="starts to take the median of")
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    args = parser.parse_args()
    imports = [import_cpu() for _ in range(args.n)]
    starts = [one_start(args.store) for _ in range(args.n)]
    load = os.getloadavg()[0]
    print(f"| measurement (median of {args.n}, store {args.store}, 1-min load {load:.1f}) | seconds |")
    print("|---|---:|")
    cpu, wall = statistics.median(c for c, _ in starts), statistics.median(w for _, w in starts)
    print(f"| `import elicithub.server.app`, user CPU | {statistics.median(imports):.2f} |")
    print(f"| `elicithub serve` until /readyz is 200, CPU (user + system) | {cpu:.2f} |")
    print(f"| `elicithub serve` until /readyz is 200, wall | {wall:.2f} |")


if __name__ == "__main__":
    main()
