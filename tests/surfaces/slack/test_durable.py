"""Questions posted to Slack outlive the hub that posted them: after a restart the buttons still answer and the
message is still updated; with a shared store, a press on one hub answers the run waiting on another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import McpProcess, free_port
from tests.core_fixtures import RedisServer
from tests.surfaces.slack.conftest import ALICE, SlackHub, slack_config
from tests.surfaces.slack.standin import Message, SlackStandIn

PROVISION = '/call mrtr.provision {"name": "orders"}'


def question_in(api: SlackStandIn, thread: str) -> Message:
    found: Message = api.wait(lambda: next((m for m in api.in_thread(thread) if m.buttons()), None))
    return found


def answer_region(hub: SlackHub, api: SlackStandIn, question: Message, region: str) -> None:
    hub.press(ALICE, question, "elicithub.answer")
    view: dict[str, Any] = api.wait(lambda: api.views[-1] if api.views else None)
    assert hub.submit(ALICE, view, {"Region": region}) == {}


def test_a_question_open_across_a_restart_is_answered_and_updated_by_the_new_hub(
    slack_env: None, standin: SlackStandIn, tmp_path: Path, mrtr_server: McpProcess
) -> None:
    port = free_port()
    config = slack_config(tmp_path, port, standin, mcp_servers=[{"id": "mrtr", "url": mrtr_server.url}])
    first = SlackHub(config, port, standin)
    thread = first.say(ALICE, PROVISION)
    question = question_in(standin, thread)
    first.stop()

    second = SlackHub(config, port, standin)  # the same store file and instance name, a new process state
    try:
        answer_region(second, standin, question, "eu-west-1")
        standin.wait(lambda: "Answered" in question.context() and not question.buttons())
        reply = standin.wait(lambda: [m for m in standin.in_thread(thread) if m.ts > question.ts])
        assert reply[0].text == "Provisioned orders in eu-west-1."
        posted = [c[1] for c in standin.calls if c[0] == "chat.postMessage"]
        assert len(posted) == 2  # the question once (not again after the restart), then the answer
    finally:
        second.stop()


def test_a_press_on_one_hub_answers_the_run_waiting_on_another(
    slack_env: None, standin: SlackStandIn, tmp_path: Path, mrtr_server: McpProcess, redis_server: RedisServer
) -> None:
    with redis_server.client(5) as client:
        client.flushdb()
    hubs = []
    for _ in range(2):
        port = free_port()
        config = slack_config(
            tmp_path,
            port,
            standin,
            store={"url": redis_server.url(5), "heartbeat_s": 1},
            mcp_servers=[{"id": "mrtr", "url": mrtr_server.url}],
        )
        hubs.append(SlackHub(config, port, standin))
    a, b = hubs
    try:
        thread = a.say(ALICE, PROVISION)
        question = question_in(standin, thread)
        answer_region(b, standin, question, "us-east-1")
        standin.wait(lambda: "Answered" in question.context() and not question.buttons())
        reply = standin.wait(lambda: [m for m in standin.in_thread(thread) if m.ts > question.ts])
        assert reply[0].text == "Provisioned orders in us-east-1."
    finally:
        for hub in hubs:
            hub.stop()
