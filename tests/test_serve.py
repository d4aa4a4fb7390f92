"""`elicithub serve` as a user runs it: a real process on embedded defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import free_port, wait_for_port


def test_serve_with_no_config_runs_on_embedded_defaults(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", "from elicithub.cli import main; main()", "serve", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").json()["status"] == "ok"
        with httpx.stream(
            "POST",
            f"http://127.0.0.1:{port}/run/api/chat",
            json={"id": "c1", "messages": [{"role": "user", "parts": [{"type": "text", "text": "hello"}]}]},
        ) as response:
            body = response.read().decode()
        assert "/call SERVER.TOOL" in body
        assert (tmp_path / ".elicithub" / "hub.db").exists()
    finally:
        process.terminate()
        output = process.communicate(timeout=20)[0].decode()
    assert f"http://127.0.0.1:{port}" in output


def test_serve_with_a_bad_config_exits_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "hub.yaml"
    config.write_text("mcp_servers:\n  - {id: x, url: 'http://127.0.0.1:1/mcp', credential_scope: everyone}\n")
    result = subprocess.run(
        [sys.executable, "-c", "from elicithub.cli import main; main()", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "mcp_servers[0].credential_scope: must be one of none, project, user" in result.stderr
