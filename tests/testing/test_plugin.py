"""The pytest plugin, run by pytest in a subprocess as a user's project would: collection, failure reports,
record and replay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.testing.conftest import DEPLOY_STDIO, PASS_AND_FAIL, SuiteFactory


def pytest_in(folder: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    # -p no:cacheprovider keeps the folder clean; the plugin itself comes from the installed entry point.
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *map(str, args)]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)


def test_each_yaml_test_is_a_pytest_item_with_a_readable_failure(write_suite: SuiteFactory, tmp_path: Path) -> None:
    write_suite(DEPLOY_STDIO, PASS_AND_FAIL)
    done = pytest_in(tmp_path, "-v")
    assert done.returncode == 1, done.stdout
    assert "flow.elicit.yaml::deploys PASSED" in done.stdout
    assert "flow.elicit.yaml::expects the wrong region FAILED" in done.stdout
    assert (
        "flow.elicit.yaml::expects the wrong region failed:\n"
        "  text does not contain 'us-east-1'; it is 'Deployed orders to eu-west-1 with 2 replicas.'"
    ) in done.stdout
    assert "1 failed, 1 passed" in done.stdout


def test_record_then_replay_through_the_plugin(write_suite: SuiteFactory, tmp_path: Path) -> None:
    write_suite(DEPLOY_STDIO, PASS_AND_FAIL)
    recorded = pytest_in(tmp_path, "-k", "deploys", "--elicithub-record", "tapes")
    assert recorded.returncode == 0, recorded.stdout
    assert (tmp_path / "tapes" / "flow" / "deploys.yaml").is_file()
    # Replayed with no server at all: the suite's command is gone.
    write_suite("command: [no-such-server-anywhere]", PASS_AND_FAIL)
    replayed = pytest_in(tmp_path, "-k", "deploys", "--elicithub-replay", "tapes")
    assert replayed.returncode == 0, replayed.stdout
    assert "1 passed, 1 deselected" in replayed.stdout


def test_a_broken_suite_is_a_collection_error_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "broken.elicit.yaml").write_text("server: {url: http://x/mcp}\ntests:\n  - name: a\n")
    done = pytest_in(tmp_path)
    assert done.returncode == 2
    assert "tests.0.call (line 3): Field required" in done.stdout
