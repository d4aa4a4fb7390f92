"""Fixtures for the Slack surface: the Web API stand-in, a hub configured for Slack, and a workspace that sends
the hub signed events and interactions the way Slack does."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from slack_sdk.signature import SignatureVerifier

from elicithub.config import parse_config
from tests.conftest import USERS, McpProcess, RunningHub, free_port
from tests.surfaces.slack.standin import BOT_USER, TEAM, Message, SlackStandIn

BOT_TOKEN = "xoxb-test-bot-token-0001"
SIGNING_SECRET = "test-signing-secret-0001"
ALICE, BOB, EVE = "UALICE", "UBOB", "UEVE"  # Alice and Bob are mapped to hub users; Eve is not
CHANNEL = "C0001"


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    api = SlackStandIn(BOT_TOKEN)
    yield api
    api.stop()


def slack_config(tmp_path: Path, port: int, api: SlackStandIn, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "public_url": f"http://127.0.0.1:{port}",
        "store": {"url": f"sqlite:///{tmp_path / 'hub.db'}"},
        "secrets": {"key_file": str(tmp_path / "secret.key")},
        "users": USERS,
        "slack": {"api_url": api.api_url, "users": {ALICE: "alice", BOB: "bob"}},
    }
    data.update(overrides)
    return data


_IDS = itertools.count(1)
"""Event ids, message timestamps and trigger ids: one count for every hub of a test (hubs sharing a store take an
event id seen before as Slack delivering it again)."""


class SignedSlack:
    """Reaching a hub (its `url`) the way Slack does: signed POSTs to /slack/events."""

    url: str

    def post(
        self, body: str, content_type: str, timestamp: int | None = None, secret: str = SIGNING_SECRET
    ) -> httpx.Response:
        """POST to /slack/events signed as Slack signs (v0 HMAC-SHA256 of the timestamp and body)."""
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        headers = {
            "content-type": content_type,
            "x-slack-request-timestamp": stamp,
            "x-slack-signature": SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body),
        }
        return httpx.post(f"{self.url}/slack/events", content=body, headers=headers, timeout=30)

    def event_body(self, slack_user: str, text: str, thread_ts: str | None = None, dm: bool = False) -> str:
        n = next(_IDS)
        event: dict[str, Any] = {
            "type": "message" if dm else "app_mention",
            "user": slack_user,
            "text": text if dm else f"<@{BOT_USER}> {text}",
            "ts": f"{1_600_000_000 + n}.000200",
            "channel": f"D{slack_user}" if dm else CHANNEL,
            "event_ts": f"{1_600_000_000 + n}.000200",
        }
        if dm:
            event["channel_type"] = "im"
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        body = {
            "token": "unused",
            "team_id": TEAM,
            "api_app_id": "A0001",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{n:06d}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        return json.dumps(body)

    def say(self, slack_user: str, text: str, thread_ts: str | None = None, dm: bool = False) -> str:
        """Mention the bot (or write to it directly); returns the thread the conversation lives in."""
        body = self.event_body(slack_user, text, thread_ts, dm)
        response = self.post(body, "application/json")
        assert response.status_code == 200, response.text
        event = json.loads(body)["event"]
        return str(event.get("thread_ts") or event["ts"])

    def interact(
        self, payload: dict[str, Any], timestamp: int | None = None, secret: str = SIGNING_SECRET
    ) -> httpx.Response:
        body = urlencode({"payload": json.dumps(payload)})
        return self.post(body, "application/x-www-form-urlencoded", timestamp, secret)

    def press_body(self, slack_user: str, message: Message, action_id: str) -> dict[str, Any]:
        button = next(b for b in message.buttons() if b["action_id"] == action_id)
        return {
            "type": "block_actions",
            "user": {"id": slack_user, "team_id": TEAM},
            "api_app_id": "A0001",
            "team": {"id": TEAM},
            "container": {"type": "message", "message_ts": message.ts, "channel_id": message.channel},
            "channel": {"id": message.channel},
            "message": {"ts": message.ts, "thread_ts": message.thread_ts, "text": message.text},
            "trigger_id": f"trigger-{next(_IDS)}",
            "actions": [{"action_id": action_id, "block_id": "question", "value": button["value"], "type": "button"}],
        }

    def press(self, slack_user: str, message: Message, action_id: str) -> httpx.Response:
        response = self.interact(self.press_body(slack_user, message, action_id))
        assert response.status_code == 200, response.text
        return response

    def submit(self, slack_user: str, view: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
        """Fill the modal as a person would (by the inputs' labels) and submit it; returns Slack's answer to it."""
        response = self.interact(submission(slack_user, view, answers))
        assert response.status_code == 200, response.text
        return response.json() if response.content else {}


class SlackHub(SignedSlack, RunningHub):
    """A hub with the Slack surface, served in a thread of the test process."""

    def __init__(self, data: dict[str, Any], port: int, api: SlackStandIn) -> None:
        super().__init__(parse_config(data), port)
        self.api = api


def suggestion(slack_user: str, view: dict[str, Any], label: str, typed: str) -> dict[str, Any]:
    """A block_suggestion payload: the person typed `typed` into the searched select labelled `label`."""
    block = next(b for b in view["blocks"] if b["type"] == "input" and b["label"]["text"] == label)
    return {
        "type": "block_suggestion",
        "user": {"id": slack_user, "team_id": TEAM},
        "container": {"type": "view", "view_id": "V1"},
        "api_app_id": "A0001",
        "team": {"id": TEAM},
        "action_id": block["element"]["action_id"],
        "block_id": block["block_id"],
        "value": typed,
        "view": {**view, "id": "V1"},
    }


def submission(slack_user: str, view: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """A view_submission payload for `view` with the inputs labelled as `answers`' keys set to its values."""
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        label = block["label"]["text"]
        state: dict[str, Any] = {"type": element["type"]}
        value = answers.get(label)
        if element["type"] in ("checkboxes", "multi_static_select"):
            initial = [o["value"] for o in element.get("initial_options", [])]
            chosen = initial if value is None else (["true"] if value is True else [] if value is False else value)
            state["selected_options"] = [o for o in element["options"] if o["value"] in chosen]
        elif element["type"] == "static_select":
            initial = (element.get("initial_option") or {}).get("value")
            chosen = value if value is not None else initial
            options = [o for o in element["options"] if o["value"] == chosen]
            state["selected_option"] = options[0] if options else None
        elif element["type"] == "external_select":  # `answers` holds the option Slack suggested
            state["selected_option"] = value if value is not None else element.get("initial_option")
        elif element["type"] == "multi_external_select":
            state["selected_options"] = value if value is not None else element.get("initial_options", [])
        elif element["type"] == "datepicker":
            state["selected_date"] = value if value is not None else element.get("initial_date")
        else:
            state["value"] = value if value is not None else element.get("initial_value")
        values[block["block_id"]] = {element["action_id"]: state}
    return {
        "type": "view_submission",
        "team": {"id": TEAM},
        "user": {"id": slack_user, "team_id": TEAM},
        "api_app_id": "A0001",
        "trigger_id": "trigger-submit",
        "view": {**view, "id": "V1", "state": {"values": values}, "hash": "h1"},
    }


@pytest.fixture
def slack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)


@pytest.fixture
def slack_hub(slack_env: None, standin: SlackStandIn, tmp_path: Path) -> Iterator[SlackHub]:
    """A hub on its demo servers (tracker: sign-in; deploy: a rich form) with the Slack surface."""
    port = free_port()
    hub = SlackHub(slack_config(tmp_path, port, standin, demo={"enabled": True}), port, standin)
    yield hub
    hub.stop()


@pytest.fixture
def mrtr_slack_hub(
    slack_env: None, standin: SlackStandIn, tmp_path: Path, mrtr_server: McpProcess
) -> Iterator[SlackHub]:
    port = free_port()
    config = slack_config(tmp_path, port, standin, mcp_servers=[{"id": "mrtr", "url": mrtr_server.url}])
    hub = SlackHub(config, port, standin)
    yield hub
    hub.stop()
