"""The MCP conformance suite's client scenarios (pinned in tests/conformance), with the hub as the client."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFORMANCE = Path(__file__).resolve().parent.parent / "conformance"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (CONFORMANCE / "node_modules").exists(),
    reason="needs node and tests/conformance/node_modules (./scripts/test runs npm ci there when node is installed)",
)


def test_sep1034_defaults_asked_on_the_standalone_stream_reach_the_server(tmp_path: Path) -> None:
    # The scenario's TypeScript SDK server asks from its tool with `server.request(...)`: on the session's
    # standalone stream, related to no call; the person accepts what is shown, and the defaults are applied.
    client = f"{sys.executable} {CONFORMANCE / 'hub_client.py'}"  # the suite splits the command on spaces
    command = ["npx", "conformance", "client", "--command", client, "--scenario", "elicitation-sep1034-client-defaults"]
    done = subprocess.run(
        [*command, "--output-dir", str(tmp_path)], cwd=CONFORMANCE, capture_output=True, text=True, timeout=120
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "Passed: 5/5, 0 failed" in report
