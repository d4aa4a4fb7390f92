"""Every request to /slack/events is checked with the signing secret and its timestamp: a bad one gets 401 and
changes nothing, neither a new run nor an answer."""

from __future__ import annotations

import json
import time

from elicithub.core.elicitation import State
from elicithub.surfaces.slack.blocks import form_view
from tests.surfaces.slack.conftest import ALICE, SlackHub, submission
from tests.surfaces.slack.standin import Message, SlackStandIn

DEPLOY = '/call deploy.deploy_service {"service": "orders"}'


def question_in(api: SlackStandIn, thread: str) -> Message:
    found: Message = api.wait(lambda: next((m for m in api.in_thread(thread) if m.buttons()), None))
    return found


FORGED = "not-the-signing-secret"
STALE_S = 6 * 60  # outside Slack's five-minute window


def test_a_forged_or_stale_event_gets_401_and_starts_nothing(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    body = slack_hub.event_body(ALICE, DEPLOY)
    assert slack_hub.post(body, "application/json", secret=FORGED).status_code == 401
    stale = int(time.time()) - STALE_S  # correctly signed, but too old
    assert slack_hub.post(body, "application/json", timestamp=stale).status_code == 401
    assert standin.calls == []
    assert slack_hub.post(body, "application/json").status_code == 200  # the same body, signed now, is taken
    question_in(standin, json.loads(body)["event"]["ts"])
    assert [c[0] for c in standin.calls].count("chat.postMessage") == 1  # one run, from the good request only


def test_a_forged_or_stale_press_or_submit_gets_401_and_answers_nothing(
    slack_hub: SlackHub, standin: SlackStandIn
) -> None:
    thread = slack_hub.say(ALICE, DEPLOY)
    question = question_in(standin, thread)
    elicitation_id = question.buttons()[0]["value"]
    before = standin.count()
    stale = int(time.time()) - STALE_S
    for action in ("elicithub.answer", "elicithub.decline", "elicithub.cancel"):
        payload = slack_hub.press_body(ALICE, question, action)
        assert slack_hub.interact(payload, secret=FORGED).status_code == 401
        assert slack_hub.interact(payload, timestamp=stale).status_code == 401
    submit = submission(ALICE, form_view(elicitation_id, "?", {"type": "object", "properties": {}}), {})
    assert slack_hub.interact(submit, secret=FORGED).status_code == 401
    assert slack_hub.interact(submit, timestamp=stale).status_code == 401
    assert standin.count() == before and standin.views == []
    stored = slack_hub.on_loop(slack_hub.hub.store.get(elicitation_id))
    assert stored is not None and stored.state is State.PENDING
    assert question.buttons() and question.edits == 0
