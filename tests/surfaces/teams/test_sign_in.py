"""A sign-in asked in Teams: the link reaches only the asked person (on the card of their 1:1 chat, or from a channel
in their own chat with the bot, never in the channel), works once without a hub session, and the tool's result
follows after the provider's consent page (the demo tracker's OAuth server on loopback)."""

from __future__ import annotations

import json

from tests.auth.conftest import Browser
from tests.surfaces.teams.conftest import ALICE, BOB, EVE, TeamsHub, teams_id
from tests.surfaces.teams.standin import Message, MicrosoftStandIn

LIST = "/call tracker.list_issues {}"
NOTE = "application/vnd.microsoft.activity.message"


def question_in(api: MicrosoftStandIn, conversation: str) -> Message:
    found: Message = api.wait(lambda: next((m for m in api.in_conversation(conversation) if m.actions()), None))
    return found


def link_of(card: Message) -> str:
    return str(next(a["url"] for a in card.actions() if a["type"] == "Action.OpenUrl"))


def test_in_a_1_1_chat_the_card_opens_the_link_which_works_once_and_the_call_goes_on(
    teams_hub: TeamsHub, microsoft: MicrosoftStandIn
) -> None:
    chat = teams_hub.say(ALICE, LIST)
    question = question_in(microsoft, chat)
    assert question.texts().startswith("Tracker requires authentication.")
    assert [(a["type"], a["title"]) for a in question.actions()] == [
        ("Action.OpenUrl", "Connect"),
        ("Action.Execute", "New link"),
        ("Action.Execute", "Decline"),
    ]
    used = link_of(question)
    assert Browser(user=None).open(used).status_code == 200  # opened, and left before the consent
    fresh = teams_hub.press(ALICE, question, "New link")  # the card again, for her alone, with another link
    assert fresh["type"] == "application/vnd.microsoft.card.adaptive"
    link = link_of(Message(chat, question.id, card=fresh["value"]))
    assert link != used and question.updates == 0
    assert link.startswith(f"{teams_hub.url}/auth/connect?t=")
    first, second = Browser(user=None), Browser(user=None)  # opened from Teams: no hub session
    consent = first.open(link)
    assert "Allow elicithub demo" in consent.text
    assert second.open(link).status_code == 403  # accepted once: someone else who saw it cannot use it
    page = first.press(consent, "Allow")
    assert page.status_code == 200 and "Connected — you can close this window." in page.text
    microsoft.wait(lambda: "Connected" in question.texts() and not question.actions())
    reply = microsoft.wait(
        lambda: [m for m in microsoft.in_conversation(chat) if "issue" in m.text and not m.streaming]
    )
    assert not reply[0].text.startswith("Tool error")
    credential = teams_hub.on_loop(teams_hub.hub.vault.credential("tracker", "alice"))
    assert credential is not None and credential.access_token not in json.dumps([c.body for c in microsoft.calls])
    first.close(), second.close()


def test_from_a_channel_the_link_goes_to_the_persons_own_chat_never_the_channel(
    teams_hub: TeamsHub, microsoft: MicrosoftStandIn
) -> None:
    thread = teams_hub.say(ALICE, LIST, thread="new")
    question = question_in(microsoft, thread)
    assert question.titles() == ["Connect", "Decline"] and "http" not in json.dumps(question.card)
    assert "Only Alice can connect" in question.texts()
    [private] = microsoft.wait(lambda: microsoft.chat_with(teams_id(ALICE)))
    opened = next(c.body for c in microsoft.calls if c.path.endswith("/v3/conversations"))
    assert opened["members"] == [{"id": teams_id(ALICE), "aadObjectId": ALICE}] and opened["isGroup"] is False
    for other in (BOB, EVE):
        refused = teams_hub.press(other, question, "Connect")
        assert refused == {"statusCode": 200, "type": NOTE, "value": "This question is for Alice."}
    again = teams_hub.press(ALICE, question, "Connect")  # a fresh link, to her chat again
    assert again["type"] == NOTE and "sent to your chat with the bot" in again["value"]
    first, fresh = microsoft.wait(
        lambda: len(microsoft.chat_with(teams_id(ALICE))) == 2 and microsoft.chat_with(teams_id(ALICE))
    )
    assert first.id == private.id and link_of(fresh) != link_of(private)
    page = Browser(user=None).sign_in(link_of(fresh))
    assert "Connected" in page.text
    microsoft.wait(lambda: "Connected" in question.texts() and not question.actions())


def test_declining_in_teams_ends_the_call(teams_hub: TeamsHub, microsoft: MicrosoftStandIn) -> None:
    chat = teams_hub.say(ALICE, LIST)
    question = question_in(microsoft, chat)
    teams_hub.press(ALICE, question, "Decline")
    microsoft.wait(lambda: "Declined" in question.texts() and not question.actions())
    reply = microsoft.wait(lambda: [m for m in microsoft.in_conversation(chat) if m.text and not m.streaming])
    assert reply[0].text == "Tool error: Authentication required but not provided."
