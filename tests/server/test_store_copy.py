"""Moving a hub to another store with `elicithub store copy`: with questions pending and a person's token held, the
hub is stopped, its store copied (SQLite to Postgres, Postgres to Redis, Redis to SQLite), and a hub on the copy
finishes every run that was waiting on answers given after the copy, calling the downstream server with the token
that was copied sealed."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth.conftest import Browser, TrackerProcess, browser, tracker, tracker_entry
from tests.conftest import McpProcess, sse_data
from tests.core_fixtures import DEADLINE_S, PostgresServer, RedisServer
from tests.server.test_durable import (
    ALICE,
    Serve,
    answer_all,
    check_all_completed_once,
    raise_questions,
    serve,
    ui_body,
    write_config,
)

__all__ = ["browser", "serve", "tracker"]

DB = 7  # a database no other test uses, on the session's redis-server


def chat(url: str, conversation: str, text: str, browser: Browser | None = None) -> tuple[str, list[dict[str, Any]]]:
    """Chat until the run ends: its text, and the questions it asked (each sign-in link opened in `browser`)."""
    asked: list[dict[str, Any]] = []
    with httpx.Client(base_url=url, headers=ALICE, timeout=DEADLINE_S) as client:
        with client.stream("POST", "/run/api/chat", json=ui_body(conversation, {"type": "text", "text": text})) as r:
            parts = []
            for part in sse_data(r):
                parts.append(part)
                if part["type"] == "data-elicitation-request":
                    asked.append(part["data"])
                    if browser is not None:
                        browser.sign_in(part["data"]["url"])
    return "".join(p.get("delta", "") for p in parts if p["type"] == "text-delta"), asked


def copy(source: str, target: str) -> str:
    """`elicithub store copy` in a process of its own, as an operator runs it; what it prints."""
    command = [sys.executable, "-c", "from elicithub.cli import main; main()", "store", "copy"]
    done = subprocess.run(
        [*command, "--from", source, "--to", target], capture_output=True, text=True, timeout=2 * DEADLINE_S
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.timeout(400)  # four hubs started one after the other, and three copies
def test_a_hub_on_each_copy_finishes_the_runs_that_were_waiting_and_uses_the_token_that_was_held(
    serve: Serve,
    tmp_path: Path,
    legacy_server: McpProcess,
    mrtr_server: McpProcess,
    tracker: TrackerProcess,
    browser: Browser,
    postgres_server: PostgresServer,
    redis_server: RedisServer,
) -> None:
    with redis_server.client(DB) as client:
        client.flushdb()
    stores = [
        f"sqlite:///{tmp_path / 'first.db'}",
        postgres_server.fresh("store_copy"),
        redis_server.url(DB),
        f"sqlite:///{tmp_path / 'last.db'}",
    ]
    servers = [
        {"id": "legacy", "url": legacy_server.url, "protocol": "legacy"},
        {"id": "mrtr", "url": mrtr_server.url},
        tracker_entry(tracker),
    ]

    def start(store: str, name: str) -> Any:
        return serve(write_config(tmp_path, store, legacy_server, mrtr_server, mcp_servers=servers), name)

    hub = start(stores[0], "sqlite")
    text, sign_in = chat(hub.url, "conv-connect", "/call tracker.list_issues {}", browser)
    assert [q["mode"] for q in sign_in] == ["url"] and not text.startswith("Tool error"), text
    unauthenticated = tracker.stats()["unauthenticated"]
    waiting = asyncio.run(raise_questions(hub.url, "hop0", 2))  # a question in each protocol era, both pending
    for hop, (source, target) in enumerate(itertools.pairwise(stores), 1):
        hub.stop()
        printed = copy(source, target)
        # Every question, run and conversation so far: the sign-in's, two of each pending per hop, and per hop after
        # the first, the run and conversation.
        assert f" {1 + 2 * hop} questions, {3 * hop} runs, {3 * hop} conversations," in printed, printed
        hub = start(target, f"hop{hop}")
        assert asyncio.run(answer_all(hub.url, waiting)) == [200, 200]
        check_all_completed_once(hub.url, waiting, legacy_server, mrtr_server)
        # The token was copied sealed: the same master key opens it, and the tracker takes it.
        title = f"Filed after copy {hop}"
        text, asked = chat(hub.url, f"conv-issue-{hop}", f'/call tracker.create_issue {{"title": "{title}"}}')
        assert asked == [] and title in text, text
        assert tracker.stats()["unauthenticated"] == unauthenticated
        waiting = asyncio.run(raise_questions(hub.url, f"hop{hop}", 2))
    hub.stop()
