"""bench/soak.py for two minutes on each shared store: nothing lost, nothing answered twice, no 5xx, every kind of
round run; and the hubs' and the store's resources bounded with a generous margin, since two minutes is short of the
windows some things are kept for (the full run's flatness is in bench/RESULTS.md). Never its timing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
KINDS = {
    *("chat", "answered", "reconnect", "expired", "cancelled", "superseded", "admin-cancel"),
    *("approved", "denied", "approval-expired", "sign-in"),
}
TOTALS = {"RSS MB": 1.5, "open fds": 3, "tasks": 3, "Redis keys": 3, "Postgres rows": 3}
"""How much each figure may grow from its first samples after the warm-up to its largest, at most."""


def installed(store: str) -> bool:
    if store == "redis":
        return shutil.which("redis-server") is not None
    return any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("store", ["redis", "postgres"])
def test_two_minutes_of_mixed_rounds_on_two_hubs_lose_nothing_and_stay_bounded(store: str, tmp_path: Path) -> None:
    if not installed(store):
        pytest.skip(f"{store} is not installed")
    figures = tmp_path / "soak.json"
    options = ["--minutes", "2", "--warmup-minutes", "1", "--rate", "2", "--sample-s", "5"]
    # Questions wait long enough that an answer given at once is never late, however busy the machine.
    options += ["--retention-s", "60", "--question-s", "20", "--json", str(figures), "--logs", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, str(BENCH / "soak.py"), "--stores", store, *options],
        capture_output=True,
        text=True,
        timeout=840,
        cwd=BENCH.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [result] = json.loads(figures.read_text())
    assert result["errors"] == {} and result["problems"] == {}, done.stdout
    assert (result["lost"], result["twice"], result["wrong"], result["server_errors"]) == (0, 0, 0, 0)
    assert set(result["rounds"]) == KINDS
    grown = {
        name: figure["max"] / figure["base"]
        for name, figure in result["resources"].items()
        if figure["base"] and any(name.endswith(total) for total in TOTALS)
    }
    assert len(grown) == 6 + 1, grown  # three figures of each hub, and the store's size
    assert all(ratio <= next(v for k, v in TOTALS.items() if name.endswith(k)) for name, ratio in grown.items()), grown
