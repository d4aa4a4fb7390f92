"""A reply grows in Teams as the model streams it: in a 1:1 chat by Teams' streaming (typing updates with the text
so far, then the final message), elsewhere posted with the first words and updated in place; paced (never once per
delta), complete when the turn ends; a turn after a tool call is a new message, below the question it asked. The
model is a provider's real one, on the stand-in of its API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elicithub.surfaces.teams import chat as teams_chat
from elicithub.surfaces.teams.records import conversation_for
from tests.conftest import McpProcess, free_port
from tests.models.script import Gate, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn
from tests.surfaces.teams.conftest import ALICE, TeamsHub, teams_config
from tests.surfaces.teams.standin import Message, MicrosoftStandIn

KEY_ENV = "ELICITHUB_TEST_MODEL_KEY"
WORDS = [f"word{i} " for i in range(60)]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelStandIn]:
    monkeypatch.setenv(KEY_ENV, "sk-standin")
    with ModelStandIn() as standin:
        yield standin


@pytest.fixture
def hub(
    teams_env: None, microsoft: MicrosoftStandIn, model: ModelStandIn, mrtr_server: McpProcess, tmp_path: Path
) -> Iterator[TeamsHub]:
    """A Teams hub whose agent runs on OpenAI's model (the stand-in), with the `mrtr` tools."""
    port = free_port()
    entry = {
        "id": "gpt",
        "provider": "openai",
        "model": "standin-1",
        "base_url": model.openai_base_url,
        "api_key_env": KEY_ENV,
    }
    servers = [{"id": "mrtr", "url": mrtr_server.url}]
    config = teams_config(tmp_path, port, microsoft, models=[entry], model="gpt", mcp_servers=servers)
    hub = TeamsHub(config, port, microsoft)
    yield hub
    hub.stop()


def interval(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """How often a growing reply may be sent: tests never wait on Teams' second, they set what they count on."""
    monkeypatch.setattr(teams_chat, "UPDATE_INTERVAL_S", seconds)


def sent_to(api: MicrosoftStandIn, message: Message) -> list[dict[str, object]]:
    """What the hub sent of `message`: its first post, then its stream's updates or its updates in place."""
    return [
        c.body
        for c in api.calls
        if "/activities" in c.path and (c.path.endswith(message.id) or c.body.get("id") == message.id)
    ]


def test_in_a_1_1_chat_the_reply_streams_and_ends_as_one_final_message(
    hub: TeamsHub, microsoft: MicrosoftStandIn, model: ModelStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    interval(monkeypatch, 3600)  # no update is due on time: only the turn's end sends the rest
    gate = Gate()
    model.reply(Thinking("Counting."), Text("Here they are: "), gate, *map(Text, WORDS))
    chat = hub.say(ALICE, "count for me")
    gate.reached.wait()
    [first] = microsoft.wait(lambda: microsoft.in_conversation(chat))
    assert first.streaming and first.text == "Here they are: "  # the first words, as a typing update (no thinking)
    [update] = [c.body for c in microsoft.calls if c.method == "POST" and "/activities" in c.path]
    assert update["type"] == "typing" and update["channelData"]["streamType"] == "streaming"
    gate.release()
    whole = "Here they are: " + "".join(WORDS)
    microsoft.wait(lambda: not first.streaming and first.text == whole)
    assert [m.id for m in microsoft.in_conversation(chat)] == [first.id]  # one message, grown in place
    final = sent_to(microsoft, first)[-1]
    assert final["type"] == "message" and final["channelData"]["streamType"] == "final"
    assert len(sent_to(microsoft, first)) <= 3  # sixty deltas released at once: not one update per delta


def test_in_a_channel_the_reply_is_posted_then_updated_in_place_on_time(
    hub: TeamsHub, microsoft: MicrosoftStandIn, model: ModelStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text that came just after the post shows once the interval has passed, though nothing more comes."""
    interval(monkeypatch, 0.3)
    held = Gate()
    model.reply(Text("Hel"), Text("lo"), held, Text(" there <you>."))
    thread = hub.say(ALICE, "greet me", thread="new")
    held.reached.wait()
    [message] = microsoft.wait(lambda: microsoft.in_conversation(thread))
    microsoft.wait(lambda: message.text == "Hello")  # shown while the model's stream is held
    held.release()
    microsoft.wait(lambda: message.text == "Hello there <you>.")
    assert message.updates >= 1 and not message.streaming
    assert len(microsoft.in_conversation(thread)) == 1
    assert not [c for c in microsoft.calls if c.body.get("type") == "typing"]  # no streaming outside 1:1 chats


def test_each_model_turn_is_its_own_message_and_a_question_comes_between_them_in_order(
    hub: TeamsHub, microsoft: MicrosoftStandIn, model: ModelStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    interval(monkeypatch, 3600)
    model.reply(Text("Let me "), Text("provision it."), ToolCall("mrtr__provision", {"name": "orders"}))
    model.reply(Text("Provisioned. "), Text("Checking..."), ToolCall("mrtr__later", {"name": "orders"}))
    model.reply(Text("Orders "), Text("is "), Text("ready."))
    chat = hub.say(ALICE, "provision orders")
    microsoft.wait(lambda: next((m for m in microsoft.in_conversation(chat) if m.card), None))
    [said] = [m for m in microsoft.in_conversation(chat) if m.card is None]
    assert said.text == "Let me provision it." and not said.streaming  # complete before the question was posted
    conversation = conversation_for(chat)
    with hub.client("alice") as client:
        [pending] = client.get(f"/run/api/conversations/{conversation}").json()["pending"]
    answered = hub.answer("alice", conversation, pending["elicitationId"], "accept", {"region": "eu-west-1"})
    assert answered.status_code == 200, answered.text
    microsoft.wait(lambda: microsoft.in_conversation(chat)[-1].text == "Orders is ready.")
    messages = microsoft.in_conversation(chat)
    assert [m.text for m in messages] == ["Let me provision it.", "", "Provisioned. Checking...", "Orders is ready."]
    assert "Which region should orders live in?" in messages[1].texts()
