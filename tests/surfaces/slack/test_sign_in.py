"""A sign-in asked in Slack: the thread says so, the link reaches only the asked person and works once, and the
tool's result lands in the thread after the provider's consent page (the demo tracker's OAuth server on loopback)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.auth.conftest import Browser, TrackerProcess
from tests.conftest import McpProcess, free_port
from tests.surfaces.slack.conftest import ALICE, BOB, BOT_TOKEN, CHANNEL, EVE, SlackHub, slack_config
from tests.surfaces.slack.standin import Message, SlackStandIn

LIST = "/call tracker.list_issues {}"


def question_in(api: SlackStandIn, thread: str) -> Message:
    found: Message = api.wait(lambda: next((m for m in api.in_thread(thread) if m.buttons()), None))
    return found


def link_of(ephemeral: dict[str, object]) -> str:
    blocks = ephemeral["blocks"]
    assert isinstance(blocks, list)
    return str(next(e["url"] for b in blocks if b["type"] == "actions" for e in b["elements"]))


def test_connect_in_slack_resumes_the_call_and_answers_in_the_thread(
    slack_hub: SlackHub, standin: SlackStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    thread = slack_hub.say(ALICE, LIST)
    question = question_in(standin, thread)
    assert question.text.startswith("Tracker requires authentication.")
    assert [b["text"]["text"] for b in question.buttons()] == ["Connect", "Decline"]
    assert "http" not in json.dumps(question.blocks)  # no link in the thread
    [ephemeral] = standin.wait(lambda: list(standin.ephemerals))
    assert (ephemeral["user"], ephemeral["channel"], ephemeral["thread_ts"]) == (ALICE, CHANNEL, thread)

    browser = Browser(user=None)  # opened from Slack: no hub session in this browser
    link = link_of(ephemeral)
    page = browser.sign_in(link)
    assert page.status_code == 200 and "Connected — you can close this window." in page.text

    standin.wait(lambda: "Connected" in question.context())
    assert question.buttons() == []
    reply = standin.wait(lambda: [m for m in standin.in_thread(thread) if m.ts > question.ts and "issue" in m.text])
    assert not reply[0].text.startswith("Tool error")

    credential = slack_hub.on_loop(slack_hub.hub.vault.credential("tracker", "alice"))
    assert credential is not None
    said = json.dumps([c[1] for c in standin.calls])
    assert credential.access_token not in said and credential.refresh_token not in said  # type: ignore[operator]
    # The hub's logs (the test's own browser logs the links it opens through httpx).
    logged = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore")))
    assert credential.access_token not in logged and BOT_TOKEN not in logged
    assert link.split("t=", 1)[1] not in logged and "/auth/connect?[redacted]" in logged
    browser.close()


def test_the_private_link_is_accepted_once_without_a_hub_session(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    thread = slack_hub.say(ALICE, LIST)
    question_in(standin, thread)
    [ephemeral] = standin.wait(lambda: list(standin.ephemerals))
    link = link_of(ephemeral)
    first, second = Browser(user=None), Browser(user=None)
    assert "Allow elicithub demo" in first.open(link).text  # the sign-in starts, the consent page is shown
    reused = second.open(link)
    assert reused.status_code == 403 and "already used" in reused.text
    bob = Browser(user="bob").open(link)  # someone signed in to the hub as another user
    assert bob.status_code == 403
    first.close(), second.close()


def test_pressing_connect_again_hands_a_fresh_link_to_the_asked_person_only(
    slack_hub: SlackHub, standin: SlackStandIn
) -> None:
    thread = slack_hub.say(ALICE, LIST)
    question = question_in(standin, thread)
    standin.wait(lambda: len(standin.ephemerals) == 1)
    for other in (BOB, EVE):
        slack_hub.press(other, question, "elicithub.connect")
        note = standin.wait(lambda o=other: [e for e in standin.ephemerals if e["user"] == o])
        assert note[0]["text"] == f"This question is for <@{ALICE}>." and "blocks" not in note[0]
    slack_hub.press(ALICE, question, "elicithub.connect")
    second = standin.wait(lambda: [e for e in standin.ephemerals[1:] if e["user"] == ALICE])
    assert link_of(second[0]) != link_of(standin.ephemerals[0])
    page = Browser(user=None).sign_in(link_of(second[0]))
    assert "Connected" in page.text
    standin.wait(lambda: "Connected" in question.context())


def test_declining_in_slack_ends_the_call(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    thread = slack_hub.say(ALICE, LIST)
    question = question_in(standin, thread)
    slack_hub.press(ALICE, question, "elicithub.decline")
    standin.wait(lambda: "Declined" in question.context() and not question.buttons())
    reply = standin.wait(lambda: [m for m in standin.in_thread(thread) if m.ts > question.ts])
    assert reply[0].text == "Tool error: Authentication required but not provided."


def test_a_server_whose_tools_only_a_sign_in_shows_never_stops_an_unrelated_slack_chat(
    slack_env: None, standin: SlackStandIn, tmp_path: Path, mrtr_server: McpProcess
) -> None:
    # As the README recommends it: a user-scoped server with no `tools:`, whose tools nobody has listed yet.
    tracker = TrackerProcess()
    servers = [
        {"id": "mrtr", "url": mrtr_server.url},
        {"id": "tracker", "url": tracker.url, "credential_scope": "user"},
    ]
    port = free_port()
    hub = SlackHub(slack_config(tmp_path, port, standin, mcp_servers=servers), port, standin)
    try:
        thread = hub.say(ALICE, "hello")
        [reply] = standin.wait(lambda: [m for m in standin.in_thread(thread) if "Available tools" in m.text])
        assert "tracker.connect" in reply.text and "mrtr.provision" in reply.text

        thread = hub.say(ALICE, '/call mrtr.provision {"name": "orders"}')
        question = question_in(standin, thread)
        assert not question.text.startswith("Tracker") and "region" in question.text.lower()
        assert standin.ephemerals == []  # no sign-in link was handed to anyone
    finally:
        hub.stop()
        tracker.kill()
        tracker.kill()
