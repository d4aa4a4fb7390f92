"""A reply grows in its Slack thread as the model streams it: posted with the model's first words, edited in place
as more comes (paced, never once per delta), complete when the turn ends; a turn after a tool call is a new message,
below the question the call asked. The model is a provider's real one, on the stand-in of its API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elicithub.surfaces.slack import thread as slack_thread
from elicithub.surfaces.slack.records import conversation_for
from tests.conftest import McpProcess, free_port
from tests.core_fixtures import DEADLINE_S
from tests.models.script import Gate, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn
from tests.surfaces.slack.conftest import ALICE, CHANNEL, SlackHub, slack_config
from tests.surfaces.slack.standin import TEAM, Message, SlackStandIn

KEY_ENV = "ELICITHUB_TEST_MODEL_KEY"
WORDS = [f"word{i} " for i in range(60)]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelStandIn]:
    monkeypatch.setenv(KEY_ENV, "sk-standin")
    with ModelStandIn() as standin:
        yield standin


@pytest.fixture
def hub(
    slack_env: None, standin: SlackStandIn, model: ModelStandIn, mrtr_server: McpProcess, tmp_path: Path
) -> Iterator[SlackHub]:
    """A Slack hub whose agent runs on OpenAI's model (the stand-in), with the `mrtr` tools."""
    port = free_port()
    entry = {
        "id": "gpt",
        "provider": "openai",
        "model": "standin-1",
        "base_url": model.openai_base_url,
        "api_key_env": KEY_ENV,
    }
    servers = [{"id": "mrtr", "url": mrtr_server.url}]
    config = slack_config(tmp_path, port, standin, models=[entry], model="gpt", mcp_servers=servers)
    hub = SlackHub(config, port, standin)
    yield hub
    hub.stop()


def edits_interval(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """How often a growing reply may be edited: tests never wait on Slack's second, they set what they count on."""
    monkeypatch.setattr(slack_thread, "UPDATE_INTERVAL_S", seconds)


def updates_of(api: SlackStandIn, message: Message) -> list[str]:
    """The texts `message` was edited to, in order."""
    return [str(p["text"]) for method, p in api.calls if method == "chat.update" and p["ts"] == message.ts]


def posts_in(api: SlackStandIn, thread: str) -> int:
    return sum(1 for method, p in api.calls if method == "chat.postMessage" and p.get("thread_ts") == thread)


def test_the_reply_is_posted_with_the_first_words_and_edited_once_to_the_whole_text(
    hub: SlackHub, standin: SlackStandIn, model: ModelStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    edits_interval(monkeypatch, 3600)  # no edit is due on time: only the turn's end edits
    gate = Gate()
    model.reply(Thinking("Counting."), Text("Here they are: "), gate, *map(Text, WORDS))
    thread = hub.say(ALICE, "count for me")
    gate.reached.wait()
    [first] = standin.wait(lambda: standin.in_thread(thread), DEADLINE_S)
    assert first.text == "Here they are: "  # the model's first words, while the stream is held (no thinking)
    gate.release()
    whole = "Here they are: " + "".join(WORDS)
    standin.wait(lambda: first.text == whole, DEADLINE_S)
    assert [m.ts for m in standin.in_thread(thread)] == [first.ts]  # the same message, grown in place
    assert updates_of(standin, first) == [whole]  # sixty deltas released at once: one edit, not one per delta
    assert posts_in(standin, thread) == 1


def test_a_reply_is_edited_on_time_while_the_model_holds_its_stream(
    hub: SlackHub, standin: SlackStandIn, model: ModelStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text that came just after the post shows once the interval has passed, though nothing more comes."""
    edits_interval(monkeypatch, 0.3)
    held = Gate()
    model.reply(Text("Hel"), Text("lo"), held, Text(" there & <you>."))
    thread = hub.say(ALICE, "greet me")
    held.reached.wait()
    [message] = standin.wait(lambda: standin.in_thread(thread), DEADLINE_S)
    standin.wait(lambda: message.text == "Hello", DEADLINE_S)  # edited while the model's stream is held
    held.release()
    standin.wait(lambda: message.text == "Hello there &amp; &lt;you&gt;.", DEADLINE_S)
    assert updates_of(standin, message)[-1] == "Hello there &amp; &lt;you&gt;."
    assert len(standin.in_thread(thread)) == 1


def test_each_model_turn_is_its_own_message_and_a_question_comes_between_them_in_order(
    hub: SlackHub, standin: SlackStandIn, model: ModelStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    edits_interval(monkeypatch, 3600)
    model.reply(Text("Let me "), Text("provision it."), ToolCall("mrtr__provision", {"name": "orders"}))
    model.reply(Text("Provisioned. "), Text("Checking..."), ToolCall("mrtr__later", {"name": "orders"}))
    model.reply(Text("Orders "), Text("is "), Text("ready."))
    thread = hub.say(ALICE, "provision orders")
    question: Message = standin.wait(
        lambda: next((m for m in standin.in_thread(thread) if m.buttons()), None), DEADLINE_S
    )
    [said] = [m for m in standin.in_thread(thread) if m.ts < question.ts]
    assert said.text == "Let me provision it."  # complete before the question was posted
    conversation = conversation_for(TEAM, CHANNEL, thread)
    with hub.client("alice") as client:
        [pending] = client.get(f"/run/api/conversations/{conversation}").json()["pending"]
    answered = hub.answer("alice", conversation, pending["elicitationId"], "accept", {"region": "eu-west-1"})
    assert answered.status_code == 200, answered.text
    standin.wait(lambda: standin.in_thread(thread)[-1].text == "Orders is ready.", DEADLINE_S)
    texts = [m.text for m in standin.in_thread(thread)]
    assert texts == ["Let me provision it.", texts[1], "Provisioned. Checking...", "Orders is ready."]
    assert texts[1].startswith("Which region should orders live in?")
    assert posts_in(standin, thread) == 4
