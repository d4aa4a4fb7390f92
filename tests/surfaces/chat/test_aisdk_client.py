"""The UI message stream read by the AI SDK's own client code (`ai` 5 and 6, pinned in tests/aisdk): no SDK errors,
valid messages, no duplicate or phantom messages, in the flows a web app goes through."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunningHub

AISDK = Path(__file__).resolve().parents[2] / "aisdk"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (AISDK / "node_modules").exists(),
    reason="needs node and tests/aisdk/node_modules (./scripts/test runs npm ci there when node is installed)",
)


def drive(hub: RunningHub, version: str, scenario: str, conversation: str) -> dict[str, Any]:
    command = ["node", "drive.mjs", version, hub.url, "alice-secret", scenario, conversation]
    done = subprocess.run(command, cwd=AISDK, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("version", ["ai5", "ai6"])
def test_a_question_answered_at_the_answer_endpoint(hub: RunningHub, version: str) -> None:
    result = drive(hub, version, "posted", f"aisdk-posted-{version}")
    assert result["errors"] == [] and result["valid"] and result["status"] == "ready"
    assert len(result["asked"]) == 1
    user, assistant = result["messages"]
    assert user["role"] == "user" and assistant["role"] == "assistant"
    assert assistant["text"] == "Provisioned orders in eu-west-1."
    assert "dynamic-tool" in assistant["types"] and "step-start" in assistant["types"]
    assert result["requests"] == ["POST /run/api/chat"]


@pytest.mark.parametrize("version", ["ai5", "ai6"])
def test_a_fast_path_answer_after_the_page_stopped_its_stream(hub: RunningHub, version: str) -> None:
    result = drive(hub, version, "fast", f"aisdk-fast-{version}")
    assert result["errors"] == [] and result["valid"]
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    continued = result["messages"][-1]
    assert continued["text"] == "Provisioned orders in us-east-1."
    assert "dynamic-tool" in continued["types"]  # the continued call's input came again, so its output has a home


@pytest.mark.parametrize("version", ["ai5", "ai6"])
def test_after_a_tool_call_nothing_is_sent_again_automatically(hub: RunningHub, version: str) -> None:
    result = drive(hub, version, "auto", f"aisdk-auto-{version}")
    assert result["errors"] == [] and result["valid"]
    assert result["requests"] == ["POST /run/api/chat"]
    assert result["messages"][-1]["text"] == "echo: hi"


@pytest.mark.parametrize("version", ["ai5", "ai6"])
def test_resuming_on_load_when_nothing_runs_adds_nothing(hub: RunningHub, version: str) -> None:
    drive(hub, version, "auto", f"aisdk-resume-{version}")  # a conversation whose run has finished
    result = drive(hub, version, "resume", f"aisdk-resume-{version}")
    assert result["errors"] == [] and result["messages"] == []
    assert result["requests"] == [f"GET /run/api/chat/aisdk-resume-{version}/stream"]
