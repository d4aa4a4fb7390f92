"""A form asked in Slack: an Answer button opens a modal built from the schema; its errors come back per field; the
message shows how the question ended, whichever way it did (answered, cancelled, expired, answered elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from elicithub.core.elicitation import State
from elicithub.surfaces.slack.records import conversation_for
from tests.conftest import McpProcess, free_port
from tests.surfaces.slack.conftest import ALICE, BOB, CHANNEL, EVE, SlackHub, slack_config, submission
from tests.surfaces.slack.standin import TEAM, Message, SlackStandIn

DEPLOY = '/call deploy.deploy_service {"service": "orders"}'


def question_in(api: SlackStandIn, thread: str) -> Message:
    found: Message = api.wait(lambda: next((m for m in api.in_thread(thread) if m.buttons()), None))
    return found


def replies_after(api: SlackStandIn, thread: str, question: Message) -> list[Message]:
    return [m for m in api.in_thread(thread) if m.ts > question.ts]


def open_form(hub: SlackHub, api: SlackStandIn, thread: str) -> tuple[Message, dict[str, Any]]:
    question = question_in(api, thread)
    hub.press(ALICE, question, "elicithub.answer")
    view: dict[str, Any] = api.wait(lambda: api.views[-1] if api.views else None)
    return question, view


def notes_to(api: SlackStandIn, slack_user: str) -> list[str]:
    """The ephemeral messages one person got."""
    return [str(e["text"]) for e in api.ephemerals if e["user"] == slack_user]


def inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["label"]["text"]: b for b in view["blocks"] if b["type"] == "input"}


def test_the_modal_is_built_from_the_schema(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    thread = slack_hub.say(ALICE, DEPLOY)
    question, view = open_form(slack_hub, standin, thread)
    assert question.text == "How should orders be deployed?"
    assert [b["text"]["text"] for b in question.buttons()] == ["Answer", "Decline", "Cancel"]
    assert view["type"] == "modal" and view["private_metadata"] == question.buttons()[0]["value"]
    fields = inputs(view)
    region = fields["Region"]
    assert region["element"]["type"] == "static_select" and not region["optional"]
    assert [o["text"]["text"] for o in region["element"]["options"]] == [
        "Europe (Ireland)",
        "US East (Virginia)",
        "Asia Pacific (Sydney)",
    ]
    features = fields["Features"]
    assert features["element"]["type"] == "checkboxes" and features["hint"]["text"] == "Optional rollout features."
    assert [o["value"] for o in features["element"]["options"]] == ["canary", "autoscaling", "tracing"]
    replicas = fields["Replicas"]["element"]
    assert replicas == {
        "type": "number_input",
        "is_decimal_allowed": False,
        "min_value": "1",
        "max_value": "10",
        "initial_value": "2",  # the schema's default, filled in
        "action_id": "value",
    }
    confirm = fields["I understand this deploys to production"]["element"]
    assert confirm["type"] == "checkboxes" and [o["value"] for o in confirm["options"]] == ["true"]


def test_field_errors_come_back_per_block_and_a_good_answer_finishes_the_call(
    slack_hub: SlackHub, standin: SlackStandIn
) -> None:
    thread = slack_hub.say(ALICE, DEPLOY)
    question, view = open_form(slack_hub, standin, thread)
    fields = inputs(view)

    refused = slack_hub.submit(ALICE, view, {"Replicas": "20", "I understand this deploys to production": True})
    assert refused == {
        "response_action": "errors",
        "errors": {fields["Region"]["block_id"]: "is required", fields["Replicas"]["block_id"]: "must be at most 10"},
    }
    assert [b["text"]["text"] for b in question.buttons()] == ["Answer", "Decline", "Cancel"]  # still open

    answers = {
        "Region": "eu-west-1",
        "Features": ["canary", "tracing"],
        "Replicas": "3",
        "I understand this deploys to production": True,
    }
    assert slack_hub.submit(ALICE, view, answers) == {}  # the modal closes
    standin.wait(lambda: "Answered" in question.context() and not question.buttons())
    reply = standin.wait(lambda: replies_after(standin, thread, question))
    assert reply[0].text == "Deployed orders to eu-west-1 with 3 replicas (canary, tracing)."


def test_only_the_asked_person_may_press_or_submit(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    thread = slack_hub.say(ALICE, DEPLOY)
    question, view = open_form(slack_hub, standin, thread)
    for other in (BOB, EVE):
        slack_hub.press(other, question, "elicithub.answer")
        slack_hub.press(other, question, "elicithub.decline")
        notes = standin.wait(lambda o=other: len(notes_to(standin, o)) == 2 and notes_to(standin, o))
        assert notes == [f"This question is for <@{ALICE}>."] * 2
        response = slack_hub.interact(submission(other, view, {"Region": "eu-west-1"}))
        assert response.json()["response_action"] == "update"
        assert f"This question is for &lt;@{ALICE}&gt;." in json.dumps(response.json()["view"])
    assert len(standin.views) == 1  # only Alice's press opened the modal
    stored = slack_hub.on_loop(slack_hub.hub.store.get(question.buttons()[0]["value"]))
    assert stored is not None and stored.state is State.PENDING
    assert question.buttons() and question.edits == 0


def test_cancel_in_slack_and_a_newer_message_both_end_the_question(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    thread = slack_hub.say(ALICE, DEPLOY)
    question = question_in(standin, thread)
    slack_hub.press(ALICE, question, "elicithub.cancel")
    standin.wait(lambda: "Cancelled" in question.context() and not question.buttons())

    slack_hub.say(ALICE, DEPLOY, thread_ts=thread)
    second = standin.wait(lambda: next((m for m in standin.in_thread(thread) if m.buttons()), None))
    slack_hub.say(ALICE, "never mind", thread_ts=thread)  # the person moved on: the open question is cancelled
    standin.wait(lambda: "Cancelled" in second.context() and not second.buttons())


def test_an_answer_given_elsewhere_updates_the_slack_message(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    thread = slack_hub.say(ALICE, DEPLOY)
    question = question_in(standin, thread)
    content = {"region": "us-east-1", "confirm": True}
    conversation = conversation_for(TEAM, CHANNEL, thread)
    elicitation_id = question.buttons()[0]["value"]
    response = slack_hub.answer("alice", conversation, elicitation_id, "accept", content)
    assert response.status_code == 200, response.text
    standin.wait(lambda: "Answered" in question.context() and not question.buttons())
    reply = standin.wait(lambda: replies_after(standin, thread, question))
    assert reply[0].text == "Deployed orders to us-east-1 with 2 replicas."
    # The conversation is Alice's alone: to Bob her question does not exist.
    assert slack_hub.answer("bob", conversation, elicitation_id, "decline").status_code == 404


def test_an_unanswered_question_expires_and_says_so(slack_env: None, standin: SlackStandIn, tmp_path: Path) -> None:
    port = free_port()
    config = slack_config(tmp_path, port, standin, demo={"enabled": True}, elicitation={"timeout_s": 1})
    hub = SlackHub(config, port, standin)
    try:
        thread = hub.say(ALICE, DEPLOY)
        question = question_in(standin, thread)
        late = hub.press_body(ALICE, question, "elicithub.answer")  # pressed after the deadline
        standin.wait(lambda: "Expired" in question.context() and not question.buttons())
        reply = standin.wait(lambda: replies_after(standin, thread, question))
        assert reply[0].text.startswith("Tool error")
        assert hub.interact(late).status_code == 200
        [note] = standin.wait(lambda: list(standin.ephemerals))
        assert note["text"] == "This question has expired." and standin.views == []
        assert note["user"] == ALICE and note["thread_ts"] == thread  # told to the presser alone, in the thread
    finally:
        hub.stop()


def test_no_run_without_a_hub_user(slack_hub: SlackHub, standin: SlackStandIn) -> None:
    thread = slack_hub.say(EVE, DEPLOY)
    [note] = standin.wait(lambda: list(standin.ephemerals))
    assert note["user"] == EVE and note["thread_ts"] == thread and "not linked" in note["text"]
    assert standin.in_thread(thread) == []
    assert httpx.get(f"{slack_hub.url}/healthz").json()["runs"] == 0


def test_a_delegated_agents_question_is_asked_and_answered_in_the_thread(
    slack_env: None, standin: SlackStandIn, tmp_path: Path, mrtr_server: McpProcess
) -> None:
    port = free_port()
    config = slack_config(
        tmp_path,
        port,
        standin,
        mcp_servers=[{"id": "mrtr", "url": mrtr_server.url}],
        agents=[{"id": "assistant", "tools": ["researcher"]}, {"id": "researcher", "tools": ["mrtr"]}],
    )
    hub = SlackHub(config, port, standin)
    try:
        inner = '/call mrtr.provision {"name": "ledger"}'
        thread = hub.say(ALICE, "/call researcher.delegate " + json.dumps({"message": inner}))
        question = question_in(standin, thread)
        assert question.text == "Which region should ledger live in?"
        assert "(from assistant → researcher)" in question.context()
        hub.press(ALICE, question, "elicithub.answer")
        view: dict[str, Any] = standin.wait(lambda: standin.views[-1] if standin.views else None)
        assert hub.submit(ALICE, view, {"Region": "eu-west-1"}) == {}
        standin.wait(lambda: "Answered" in question.context() and not question.buttons())
        reply = standin.wait(lambda: replies_after(standin, thread, question))
        assert reply[0].text == "Provisioned ledger in eu-west-1."
    finally:
        hub.stop()


def test_a_form_with_more_fields_than_a_modal_holds_links_the_widget_on_its_conversation(
    mrtr_slack_hub: SlackHub, standin: SlackStandIn
) -> None:
    hub = mrtr_slack_hub
    thread = hub.say(ALICE, "/call mrtr.survey {}")
    question = question_in(standin, thread)
    link, decline, cancel = question.buttons()
    conversation = conversation_for(TEAM, CHANNEL, thread)
    assert (link["text"]["text"], link["url"]) == ("Answer in the browser", f"{hub.url}/?conversation={conversation}")
    assert [decline["text"]["text"], cancel["text"]["text"]] == ["Decline", "Cancel"]
    # The widget answers in the thread's conversation, as its hub user (alice) does anywhere.
    with hub.client("alice") as alice:
        [pending] = alice.get(f"/run/api/conversations/{conversation}").json()["pending"]
        assert pending["message"] == "Which hold?" and len(pending["requestedSchema"]["properties"]) == 120
        body = {"conversationId": conversation, "elicitationId": pending["elicitationId"], "action": "accept"}
        answered = alice.post("/run/api/elicitation-responses", json={**body, "content": {"q007": True}})
        assert answered.status_code == 200, answered.text
    standin.wait(lambda: "Answered" in question.context() and not question.buttons())
    [reply] = standin.wait(lambda: replies_after(standin, thread, question))
    assert reply.text == "1 of 120 hold."
    assert standin.views == []  # no modal was ever opened for it
