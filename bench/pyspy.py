"""Sample a running hub with py-spy and summarise where its CPU goes (used by load.py --profile).

Also runnable on a saved profile:  uv run python bench/pyspy.py PROFILE.txt [--top 30]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def record(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """Start sampling `pid` (only while it runs on a CPU: --idle is off) for `seconds` into `out` (collapsed)."""
    binary = shutil.which("py-spy")
    if binary is None:
        raise SystemExit("py-spy is not installed (pip install py-spy)")
    command = [binary, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds)))]
    command += ["--rate", "250", "--format", "raw", "--nonblocking", "--output", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def short(frame: str) -> str:
    """`name (path/to/site-packages/pkg/mod.py:12)` -> `pkg/mod.py:name`."""
    match = FRAME.match(frame)
    if match is None:
        return frame
    path = match["file"]
    for marker in ("site-packages/", "/src/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{match['name']}"


def summary(profile: Path, top: int = 30, rounds: int | None = None) -> str:
    """The functions with the most samples on-CPU: self (leaf) and inclusive, as shares of all samples."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    for line in profile.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [short(f) for f in stack.split(";")]  # outermost first
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
        packages[_package(frames[-1])] += count
    if not total:
        return "(no samples)"
    per = f" (samples/round trip {total / rounds:.2f})" if rounds else ""
    lines = [f"{total} samples{per}", "", "| self % | function |", "|---:|---|"]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in own.most_common(top)]
    lines += ["", "| inclusive % | function |", "|---:|---|"]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in inclusive.most_common(top)]
    lines += ["", "| self % | package |", "|---:|---|"]
    lines += [f"| {100 * n / total:.1f} | {name} |" for name, n in packages.most_common(15)]
    return "\n".join(lines)


def _package(frame: str) -> str:
    path = frame.split(":", 1)[0]
    head = path.split("/", 1)[0]
    return head.removesuffix(".py") if "/" in path else f"stdlib {head.removesuffix('.py')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    print(summary(args.profile, args.top))


if __name__ == "__main__":
    main()
