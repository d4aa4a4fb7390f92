"""What the benchmarks share: starting and stopping hubs, the MCP test server and redis-server, and percentiles."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MRTR_SERVER = ROOT / "tests" / "servers" / "mrtr_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def elicithub_command() -> list[str]:
    script = Path(sys.executable).parent / "elicithub"
    if script.exists():
        return [str(script)]
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("neither the elicithub script next to this python nor uv was found")
    return [uv, "run", "elicithub"]


def spawn(command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`command` from the repository's root, its output in `log`; `env` adds to this process's environment."""
    with log.open("wb") as out:
        environ = {**os.environ, **env} if env else None
        return subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=environ)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def serve(
    workdir: Path,
    name: str,
    config: dict[str, Any],
    options: list[str] | None = None,
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """`elicithub serve` with this config (and command-line `options`, environment `env`) on `port` (else a free
    one); wait_for_port before use."""
    path = workdir / f"{name}.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    port = port or free_port()
    process = spawn(
        [*elicithub_command(), "serve", "--config", str(path), "--port", str(port), *(options or [])],
        workdir / f"{name}.log",
        env,
    )
    return process, port


def start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A private redis-server without persistence, ready to use."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt install redis-server)")
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = spawn([*command, "--dir", str(workdir)], workdir / "redis.log")
    wait_for_port(port, process)
    return process, port


def start_postgres() -> tuple[subprocess.Popen[bytes], str, Path]:
    """A private PostgreSQL cluster (durability off), ready to use: its server process, the URL of a database, and
    its folder (remove it once the server stopped). PostgreSQL refuses to run as root: as root the cluster belongs
    to the `postgres` user (Debian's package makes it), in a folder of its own that it may enter."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed (apt install postgresql)")
    bindir, user = found[-1].parent, "postgres" if os.geteuid() == 0 else None
    data = Path(tempfile.mkdtemp(prefix="elicithub-bench-pg-"))
    if user is not None:
        shutil.chown(data, user)
    initdb = [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]
    subprocess.run(initdb, check=True, stdout=subprocess.DEVNULL, user=user)
    port = free_port()
    settings = {"listen_addresses": "127.0.0.1", "unix_socket_directories": str(data), "fsync": "off"}
    command = [str(bindir / "postgres"), "-D", str(data), "-p", str(port)]
    command += [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, user=user)
    wait_for_port(port, process)
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    for _ in range(100):  # listening is not yet accepting connections
        if (
            subprocess.run([str(bindir / "psql"), "-X", "-q", url, "-c", "SELECT 1"], capture_output=True).returncode
            == 0
        ):
            return process, url, data
        time.sleep(0.1)
    raise RuntimeError("PostgreSQL did not finish starting")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_ticks() -> dict[str, int]:
    """The whole machine's CPU time so far, by kind (Linux /proc/stat, in clock ticks)."""
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    values = Path("/proc/stat").read_text().splitlines()[0].split()[1 : 1 + len(names)]
    return dict(zip(names, map(int, values), strict=True))


def shares(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Each kind's share (%) of the machine's CPU time between two machine_ticks(), and the busy seconds."""
    spent = {k: after[k] - before[k] for k in before}
    total = sum(spent.values()) or 1
    busy = total - spent["idle"] - spent["iowait"]
    return {k: 100 * v / total for k, v in spent.items()} | {"busy s": busy / os.sysconf("SC_CLK_TCK")}


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (linear interpolation between closest ranks), in milliseconds."""
    data = sorted(values)
    if not data:
        return float("nan")
    pos = (len(data) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return 1000 * (data[lo] + (data[hi] - data[lo]) * (pos - lo))


def chat_chunk(line: str) -> tuple[str, Any] | None:
    """One line of the hub's OpenAI-compatible stream: ("done", None) at `[DONE]`, ("event", the elicitation event)
    for an `elicitation-*` chunk, ("text", str) for text; None for anything else (ids, keep-alives, empty deltas)."""
    if not line.startswith("data: "):
        return None
    payload = line.removeprefix("data: ")
    if payload == "[DONE]":
        return "done", None
    content = json.loads(payload)["choices"][0]["delta"].get("content")
    if not content:
        return None
    if content.startswith('{"type": "elicitation-'):
        return "event", json.loads(content)
    return "text", content
