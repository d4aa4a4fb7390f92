"""`elicithub serve --log-format json` as a log collector reads it: one JSON object per line, naming the run,
conversation and question it is about, and never a token, an authorization code or what a person answered."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from elicithub.auth.keys import load_keys
from elicithub.auth.vault import Vault
from elicithub.config import SecretsConfig
from elicithub.store.sqlite import SqliteBackend
from tests.auth.conftest import Browser, TrackerProcess, bearer, tracker_entry
from tests.conftest import USERS, HubAddress, McpProcess, free_port, sse_data, wait_for_port

ANSWER = "zebra-7731-quartz"
"""What the person answers: a value no log line may hold."""


def chat(hub: HubAddress, conversation: str, text: str, on_question: Any) -> str:
    """A UI-stream chat; `on_question(event)` answers each question as it comes; the text the run wrote."""
    body = {"id": conversation, "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}]}
    headers = {**bearer("alice"), "x-supports-elicitation": "true"}
    written = []
    with (
        httpx.Client(base_url=hub.url, headers=headers, timeout=60) as client,
        client.stream("POST", "/run/api/chat", json=body) as response,
    ):
        for part in sse_data(response):
            if part["type"] == "data-elicitation-request":
                on_question(part["data"])
            elif part["type"] == "text-delta":
                written.append(part["delta"])
    return "".join(written)


def test_json_lines_name_their_work_and_hold_no_secret(
    tracker: TrackerProcess, mrtr_server: McpProcess, tmp_path: Path
) -> None:
    config = tmp_path / "hub.yaml"
    secrets = {"key_file": str(tmp_path / "secret.key")}
    config.write_text(
        json.dumps(
            {
                "store": {"url": f"sqlite:///{tmp_path / 'hub.db'}"},
                "secrets": secrets,
                "users": USERS,
                "server": {"drain_s": 0},
                "mcp_servers": [tracker_entry(tracker), {"id": "mrtr", "url": mrtr_server.url}],
            }
        )
    )
    hub = HubAddress(free_port())
    log = tmp_path / "hub.log"
    command = [sys.executable, "-c", "from elicithub.cli import main; main()", "serve", "--log-format", "json"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--config", str(config), "--port", str(hub.port)], stdout=out, stderr=subprocess.STDOUT
        )
    browser = Browser()
    links: list[str] = []
    try:
        wait_for_port(hub.port)

        def sign_in(event: dict[str, Any]) -> None:
            links.append(event["url"])
            browser.sign_in(event["url"])

        assert not chat(hub, "conv-sign-in", "/call tracker.list_issues {}", sign_in).startswith("Tool error")

        def answer(event: dict[str, Any]) -> None:
            answered = hub.answer("alice", "conv-answer", event["elicitationId"], "accept", {"new_name": ANSWER})
            assert answered.status_code == 200, answered.text

        assert chat(hub, "conv-answer", '/call mrtr.rename {"name": "db"}', answer).endswith(f"{ANSWER}.")
    finally:
        browser.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0

    async def credential() -> Any:
        backend = SqliteBackend(tmp_path / "hub.db")
        try:
            return await Vault(backend.kv, load_keys(SecretsConfig(**secrets))).credential("tracker", "alice")
        finally:
            await backend.close()

    stored = asyncio.run(credential())
    callback = parse_qs(urlsplit(browser.callback_url()).query)
    forbidden = {
        "access token": stored.access_token,
        "refresh token": stored.refresh_token,
        "authorization code": callback["code"][0],
        "state": callback["state"][0],
        "link token": parse_qs(urlsplit(links[0]).query)["t"][0],
        "answer": ANSWER,
        "bearer token": USERS[0]["token"],
    }
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines()]  # every line is one JSON object
    assert all({"ts", "level", "logger", "msg"} <= line.keys() for line in lines)
    for name, value in forbidden.items():
        assert value not in text, f"the {name} appeared in a log line"
    accesses = [line for line in lines if line["logger"] == "uvicorn.access"]
    assert {"method": "POST", "path": "/run/api/chat", "status": 200}.items() <= accesses[0].items()
    assert any(line["path"].startswith("/auth/callback?[redacted]") for line in accesses)
    ended = [line for line in lines if line["msg"].startswith("elicitation ") and line["msg"].endswith(" accepted")]
    assert len(ended) == 2
    assert all({"elicitation_id", "run_id", "conversation_id"} <= line.keys() for line in ended)
    assert {line["conversation_id"] for line in ended} == {"conv-sign-in", "conv-answer"}
