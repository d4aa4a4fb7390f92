"""A form asked in Teams: an Adaptive Card built from the schema, answered with Action.Execute in both MCP eras and
by a task; a refused answer comes back as the card with its field errors and the question stays open; Decline and
Cancel end it; another person's press changes nothing; however the question ends its card says so for everyone,
with what was chosen and who answered."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elicithub.core.elicitation import State
from elicithub.surfaces.teams.records import conversation_for
from tests.conftest import McpProcess, free_port
from tests.surfaces.teams.conftest import ALICE, BOB, EVE, TeamsHub, teams_config
from tests.surfaces.teams.standin import Message, MicrosoftStandIn

DEPLOY = '/call deploy.deploy_service {"service": "orders"}'
CARD = "application/vnd.microsoft.card.adaptive"
NOTE = "application/vnd.microsoft.activity.message"


@pytest.fixture
def eras_hub(
    teams_env: None, microsoft: MicrosoftStandIn, tmp_path: Path, legacy_server: McpProcess
) -> Iterator[TeamsHub]:
    """The demo's servers (deploy: 2026-07-28 with a task, release) and a 2025-11-25 server that elicits mid-call."""
    port = free_port()
    legacy = {"id": "legacy", "url": legacy_server.url, "protocol": "legacy"}
    hub = TeamsHub(
        teams_config(tmp_path, port, microsoft, demo={"enabled": True}, mcp_servers=[legacy]), port, microsoft
    )
    yield hub
    hub.stop()


def question_in(api: MicrosoftStandIn, conversation: str) -> Message:
    found: Message = api.wait(lambda: next((m for m in api.in_conversation(conversation) if m.actions()), None))
    return found


def after(api: MicrosoftStandIn, conversation: str, question: Message) -> list[Message]:
    """The bot's messages below the question, once complete."""
    messages = api.in_conversation(conversation)
    return [m for m in messages[messages.index(question) + 1 :] if not m.streaming]


def test_the_card_is_built_from_the_schema(teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    chat = teams_hub.say(ALICE, DEPLOY)
    question = question_in(microsoft, chat)
    assert question.card is not None and question.card["version"] == "1.5"
    assert "How should orders be deployed?" in question.texts() and "A question for Alice." in question.texts()
    assert question.titles() == ["Submit", "Decline", "Cancel"]
    assert {a["type"] for a in question.actions()} == {"Action.Execute"}
    inputs = question.inputs()
    region = inputs["Region"]
    assert region["type"] == "Input.ChoiceSet" and region["isRequired"] is True
    assert [(c["title"], c["value"]) for c in region["choices"]] == [
        ("Europe (Ireland)", "eu-west-1"),
        ("US East (Virginia)", "us-east-1"),
        ("Asia Pacific (Sydney)", "ap-southeast-2"),
    ]
    features = inputs["Features"]
    assert features["isMultiSelect"] is True and [c["value"] for c in features["choices"]] == [
        "canary",
        "autoscaling",
        "tracing",
    ]
    assert "Optional rollout features." in question.texts()
    replicas = inputs["Replicas"]
    assert (replicas["type"], replicas["min"], replicas["max"], replicas["value"]) == ("Input.Number", 1, 10, 2)
    confirm = inputs["I understand this deploys to production"]
    assert (confirm["type"], confirm["value"], confirm["valueOn"]) == ("Input.Toggle", "false", "true")


def test_a_refused_answer_comes_back_with_its_errors_and_a_good_one_ends_the_card_for_everyone(
    teams_hub: TeamsHub, microsoft: MicrosoftStandIn
) -> None:
    chat = teams_hub.say(ALICE, DEPLOY)
    question = question_in(microsoft, chat)
    refused = teams_hub.press(
        ALICE, question, "Submit", {"Replicas": 20, "I understand this deploys to production": True}
    )
    assert refused["statusCode"] == 200 and refused["type"] == CARD
    again = Message(chat, question.id, card=refused["value"])
    assert "is required" in again.texts() and "must be at most 10" in again.texts()
    assert again.inputs()["Replicas"]["value"] == 20  # what was sent, kept for the person to correct
    assert question.updates == 0 and question.titles() == ["Submit", "Decline", "Cancel"]  # still open

    answers = {"Region": "eu-west-1", "Features": ["canary", "tracing"], "Replicas": 3}
    answered = teams_hub.press(ALICE, again, "Submit", {**answers, "I understand this deploys to production": True})
    assert answered["type"] == CARD and "Answered by Alice" in Message(chat, "", card=answered["value"]).texts()
    microsoft.wait(lambda: question.updates == 1)  # the card everyone sees, replaced once
    assert question.actions() == [] and "✅ Answered by Alice" in question.texts()
    assert "Region: Europe (Ireland)" in question.texts() and "Features: canary, tracing" in question.texts()
    [reply] = microsoft.wait(lambda: after(microsoft, chat, question))
    assert reply.text == "Deployed orders to eu-west-1 with 3 replicas (canary, tracing)."


def test_another_persons_press_is_refused_and_changes_nothing(teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    thread = teams_hub.say(ALICE, DEPLOY, thread="new")  # in a channel, where others see the card
    question = question_in(microsoft, thread)
    for other in (BOB, EVE):
        for title in ("Submit", "Decline", "Cancel"):
            refused = teams_hub.press(other, question, title, {"Region": "eu-west-1"})
            assert refused == {"statusCode": 200, "type": NOTE, "value": "This question is for Alice."}
    elicitation_id = question.actions()[0]["data"]["elicitationId"]
    stored = teams_hub.on_loop(teams_hub.hub.store.get(elicitation_id))
    assert stored is not None and stored.state is State.PENDING
    assert question.updates == 0 and question.titles() == ["Submit", "Decline", "Cancel"]


def test_decline_and_cancel_end_the_question_and_say_so(teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    chat = teams_hub.say(ALICE, DEPLOY)
    question = question_in(microsoft, chat)
    declined = teams_hub.press(ALICE, question, "Decline")
    assert "Declined by Alice" in Message(chat, "", card=declined["value"]).texts()
    microsoft.wait(lambda: "🚫 Declined by Alice" in question.texts() and not question.actions())
    teams_hub.say(ALICE, DEPLOY)
    second = microsoft.wait(lambda: [m for m in microsoft.in_conversation(chat) if m.actions()])[0]
    stale = copy.deepcopy(second)  # the card as a client that has not refreshed still shows it
    teams_hub.press(ALICE, second, "Cancel")
    microsoft.wait(lambda: "✖️ Cancelled" in second.texts() and not second.actions())
    late = teams_hub.press(ALICE, stale, "Submit", {"Region": "eu-west-1"})
    assert late == {"statusCode": 200, "type": NOTE, "value": "This question was already cancelled."}


def test_an_answer_given_elsewhere_updates_the_card(teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    chat = teams_hub.say(ALICE, DEPLOY)
    question = question_in(microsoft, chat)
    elicitation_id = question.actions()[0]["data"]["elicitationId"]
    content = {"region": "us-east-1", "confirm": True}
    response = teams_hub.answer("alice", conversation_for(chat), elicitation_id, "accept", content)
    assert response.status_code == 200, response.text
    microsoft.wait(lambda: "Answered by Alice" in question.texts() and not question.actions())
    [reply] = microsoft.wait(lambda: after(microsoft, chat, question))
    assert reply.text == "Deployed orders to us-east-1 with 2 replicas."


def answer_in_teams(hub: TeamsHub, api: MicrosoftStandIn, chat: str, given: dict[str, Any]) -> Message:
    question = question_in(api, chat)
    answered = hub.press(ALICE, question, "Submit", given)
    assert answered["type"] == CARD and not Message(chat, "", card=answered["value"]).actions(), answered
    api.wait(lambda: not question.actions())
    return question


def test_a_2025_11_25_servers_question_is_answered_in_teams(eras_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    chat = eras_hub.say(ALICE, '/call legacy.provision {"name": "ledger"}')
    question = answer_in_teams(eras_hub, microsoft, chat, {"Region": "eu-west-1"})
    assert "Which region should ledger live in?" in question.texts()
    [reply] = microsoft.wait(lambda: after(microsoft, chat, question))
    assert reply.text == "Provisioned ledger in eu-west-1."


def test_a_tasks_question_is_answered_in_teams(eras_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    chat = eras_hub.say(ALICE, '/call deploy.migrate {"database": "orders-db"}')
    question = question_in(microsoft, chat)
    [toggle] = question.inputs().values()
    assert toggle["type"] == "Input.Toggle" and toggle["title"].startswith("Apply ")
    answer_in_teams(eras_hub, microsoft, chat, {toggle["title"]: True})
    reply = microsoft.wait(lambda: [m for m in after(microsoft, chat, question) if "Migrated" in m.text])
    assert reply[0].text.startswith("Migrated orders-db:")


def test_long_forms_and_long_choice_lists_fit_one_card(mrtr_teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    hub = mrtr_teams_hub
    chat = hub.say(ALICE, "/call mrtr.survey {}")
    survey = question_in(microsoft, chat)
    assert len(survey.inputs()) == 120 and {i["type"] for i in survey.inputs().values()} == {"Input.Toggle"}
    hub.press(ALICE, survey, "Submit", {"Statement 007 holds": True})
    microsoft.wait(lambda: [m for m in after(microsoft, chat, survey) if m.text == "1 of 120 hold."])
    hub.say(ALICE, "/call mrtr.pick {}")
    pick = microsoft.wait(lambda: [m for m in microsoft.in_conversation(chat) if m.actions()])[0]
    styles = sorted((len(i["choices"]), i["style"]) for i in pick.inputs().values() if "choices" in i)
    assert styles == [(120, "compact"), (251, "filtered")]  # the long single choice is searched as one types
