"""The Slack surface is mounted only when configured, and a configured one needs its secrets in the environment."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from elicithub.config import parse_config
from elicithub.errors import SlackUnusable
from elicithub.server.hub import Hub
from elicithub.surfaces.slack.records import conversation_for
from tests.conftest import RunningHub
from tests.surfaces.slack.conftest import ALICE, SlackHub
from tests.surfaces.slack.standin import TEAM, SlackStandIn


def test_without_a_slack_section_there_is_no_slack_endpoint(tmp_path: Path) -> None:
    config = parse_config({"store": {"url": "memory://"}, "secrets": {"key_file": str(tmp_path / "k")}})
    hub = RunningHub(config)
    try:
        assert httpx.post(f"{hub.url}/slack/events", content=b"{}").status_code in (404, 405)
    finally:
        hub.stop()


def test_a_missing_secret_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "x")
    config = parse_config({"store": {"url": "memory://"}, "slack": {}, "secrets": {"key_file": str(tmp_path / "k")}})
    with pytest.raises(SlackUnusable, match=r"\$SLACK_BOT_TOKEN is not set"):
        Hub(config)


def test_slack_url_verification_is_answered(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    response = slack_hub.post('{"type": "url_verification", "challenge": "abc123"}', "application/json")
    assert response.status_code == 200 and response.json() == {"challenge": "abc123"}


def test_a_direct_message_runs_the_agent_and_a_thread_is_one_conversation(
    slack_hub: SlackHub, standin: SlackStandIn
) -> None:
    thread = slack_hub.say(ALICE, "hello", dm=True)
    first = standin.wait(lambda: standin.in_thread(thread))
    assert first[0].channel == f"D{ALICE}" and "/call" in first[0].text  # the scripted model's help text
    slack_hub.say(ALICE, "hello again", thread_ts=thread, dm=True)
    standin.wait(lambda: len(standin.in_thread(thread)) == 2)
    conversation = conversation_for(TEAM, f"D{ALICE}", thread)
    with slack_hub.client("alice") as client:
        transcript = client.get(f"/run/api/conversations/{conversation}").json()
    said = [m["text"] for m in transcript["messages"] if m["role"] == "user"]
    assert said == ["hello", "hello again"]
