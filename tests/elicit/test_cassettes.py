"""The demo servers' cassettes in this folder: what recording gives today, byte for byte, and they replay with no
server. When a change to the demo servers or the runner is meant, record them again:
`uv run elicithub test tests/elicit/*.elicit.yaml --record tests/elicit/cassettes`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.testing.conftest import run_suite

HERE = Path(__file__).parent
SUITES = sorted(HERE.glob("*.elicit.yaml"))


@pytest.mark.parametrize("suite", SUITES, ids=lambda p: p.name)
def test_recording_again_gives_the_committed_bytes(suite: Path, tmp_path: Path) -> None:
    assert all(o.passed for o in run_suite(suite, record=tmp_path))
    stem = suite.name.split(".")[0]
    again = {p.name: p.read_bytes() for p in (tmp_path / stem).iterdir()}
    committed = {p.name: p.read_bytes() for p in (HERE / "cassettes" / stem).iterdir()}
    assert again == committed


@pytest.mark.parametrize("suite", SUITES, ids=lambda p: p.name)
def test_the_committed_cassettes_replay_with_no_server(suite: Path) -> None:
    outcomes = run_suite(suite, replay=HERE / "cassettes")
    assert [o.failures for o in outcomes] == [[]] * len(outcomes)
