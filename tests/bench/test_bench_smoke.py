"""The benchmarks still run (a few rounds each); their timings are for bench/RESULTS.md, never asserted here."""

from __future__ import annotations

import pstats
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=180, cwd=BENCH.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_round_trip_benchmark_runs() -> None:
    out = run("roundtrip.py", "--n", "3", "--warmup", "1")
    assert "through the hub" in out and "N = 3" in out


def test_the_hub_cpu_benchmark_compares_two_trees_and_profiles_the_hub(tmp_path: Path) -> None:
    src = str(BENCH.parent / "src")
    out = run("hub_cpu.py", "--n", "3", "--warmup", "1", "--pairs", "1", "--before", src)
    assert out.startswith("before: median ") and "\nafter: median " in out, out
    profile = tmp_path / "hub.prof"
    out = run("hub_cpu.py", "--n", "3", "--warmup", "1", "--profile", str(profile))
    assert out.startswith("profiled: "), out
    assert any("elicithub" in path for path, _, _ in pstats.Stats(str(profile)).stats), "the hub's code is in it"


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_the_load_benchmark_runs_on_sqlite_and_two_hubs_on_redis() -> None:
    out = run("load.py", "--chats", "4", "--seconds", "1", "--warmup", "0.5", "--setups", "sqlite,redis2+fast")
    rows = [line for line in out.splitlines() if line.startswith(("| sqlite", "| redis2"))]
    assert [row.split(" | ")[0] for row in rows] == ["| sqlite", "| redis2+fast"]
    assert all(row.split(" | ")[5] == "0" for row in rows), out  # no errors


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_the_answers_benchmark_runs_with_questions_left_pending() -> None:
    out = run("answers.py", "--n", "20", "--pending", "40", "--clients", "4")
    rows = [line for line in out.splitlines() if line.startswith(("| sqlite", "| redis"))]
    assert len(rows) == 3 and "with 40 pending" in out, out


def test_the_memory_benchmark_runs() -> None:
    out = run("memory.py", "--n", "10", "--concurrency", "4")
    assert "streams closed" in out and "streams open" in out, out


def test_the_idle_memory_benchmark_runs() -> None:
    out = run("idle.py", "--n", "10", "--kb", "1", "--rounds", "1")
    assert "round 1: N written" in out and "round 1: N gone" in out, out


def test_the_holdings_benchmark_runs() -> None:
    out = run("holds.py", "--n", "5", "--top", "3")
    assert "KB traced per question" in out, out


def test_the_sdk_client_benchmark_runs_both_ways_and_groups_the_sdk_cost() -> None:
    out = run("sdk_client.py", "--n", "4", "--block", "2", "--profile")
    assert "| official SDK" in out and "| same requests by hand" in out and "The SDK's own work" in out, out
    assert "| pydantic" in out, out


def test_the_long_conversation_benchmark_runs() -> None:
    out = run("long.py", "--n", "3", "--turns", "1,4", "--concurrency", "2", "--settle", "0")
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| sqlite")]
    assert [row[1] for row in rows] == ["1", "4"] and all(row[2] == "3" for row in rows), out


def test_the_start_benchmark_times_a_hub_until_ready() -> None:
    out = run("start.py", "--n", "1", "--store", "memory")
    assert "until /readyz is 200, CPU" in out and "until /readyz is 200, wall" in out, out


def test_the_model_stream_benchmark_runs_one_stream_and_many() -> None:
    out = run(
        "model_stream.py",
        *("--n", "2", "--warmup", "1", "--tokens", "3", "--streams", "2", "--rate", "100", "--phases", "1"),
        *("--spread", "0.1", "--store", "memory"),
    )
    assert out.count("| **added by the hub** |") == 2, out
    assert out.count("hub CPU per relayed token: **") == 2 and "The hub's model client alone" in out, out


def test_the_floor_benchmark_runs_every_mode() -> None:
    out = run("floor.py", "--n", "2", "--warmup", "1", "--floors", "default,fresh")
    modes = [line.split(" | ")[0].removeprefix("| ") for line in out.splitlines() if line.startswith("| ")][1:]
    assert modes == ["direct", "direct-open", "floor[default]", "floor[fresh]", "hub-memory", "hub-sqlite"], out


def test_the_gateway_benchmark_runs_every_way_in_both_eras() -> None:
    out = run("gateway.py", "--n", "3", "--warmup", "1", "--block", "3")
    for era in ("2026-07-28", "2025-11-25"):
        for way in ("direct", "gateway", "agent tool", "bare SDK proxy"):
            assert f"| {way} ({era}) |" in out, out
    assert "CPU milliseconds per call" in out and "| gateway | " in out, out


def test_the_overload_benchmark_sheds_cleanly_and_loses_no_question() -> None:
    out = run("overload.py", "--clients", "1", "--seconds", "1", "--baseline-seconds", "0.5", "--sheds", "20")
    phases = ("| unloaded", "| sustained", "| overload", "| shed only")
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith(phases)]
    assert [row[0] for row in rows] == list(phases), out
    assert all(row[5] == "none" and row[9] == "0" for row in rows), out  # no status but 200 and 503, no error
    assert rows[-1][4] == "20", out  # with the hub's runs held on their questions, every request is shed
    assert "5xx other than 503: 0." in out and "lost or wrong in all phases: 0;" in out, out
    assert "the hub holds 0 runs and 0 pending questions" in out, out
    shed = re.search(r"it shed (\d+) by its own count, (\d+) by the clients'", out)
    assert shed is not None and shed[1] == shed[2], out
    ready = re.search(r"/readyz during the overload: \{(.*)\}", out)
    assert ready is not None and "503" not in ready[1], out
