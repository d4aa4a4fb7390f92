"""The widget in a real browser against a hub whose model streams (a provider's real model pointed at the stand-in):
the reply grows as the model writes it, thinking shows folded away apart from the answer, a retry says so until the
reply goes on, and a call shows its arguments once written."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.conftest import HubFactory, RunningHub
from tests.models.hubs import standin_models
from tests.models.script import Fail, Gate, Text, Thinking, ToolCall
from tests.models.standins import ModelStandIn
from tests.web.conftest import OpenPage, say

ANSWER = ".message.assistant > .text"


def test_the_reply_shows_its_first_words_before_the_model_has_written_the_rest(
    make_hub: HubFactory, model_standin: ModelStandIn, open_page: OpenPage
) -> None:
    hub = make_hub(**standin_models(model_standin))
    gate = Gate()
    model_standin.reply(Text("First words "), Text("come "), gate, Text("and then "), Text("the rest."))
    page = open_page(hub)
    say(page, "hi")
    gate.reached.wait()
    answer = page.locator(ANSWER)
    expect(answer).to_have_text("First words come")  # while the model still holds the rest
    gate.release()
    expect(answer).to_have_text("First words come and then the rest.")
    expect(answer).to_have_count(1)


def test_a_retry_shows_until_the_reply_goes_on_and_thinking_stays_folded_apart_from_the_answer(
    make_hub: HubFactory, model_standin: ModelStandIn, open_page: OpenPage
) -> None:
    hub = make_hub(**standin_models(model_standin, "anthropic"))
    gate = Gate()
    model_standin.reply(Fail(429, "Overloaded.", retry_after=0))
    model_standin.reply(gate, Thinking("They greet me; "), Thinking("greet back."), Text("Hello!"))
    page = open_page(hub)
    say(page, "hi")
    gate.reached.wait()  # the retry's request is held before its first piece
    status = page.locator(".message.assistant .model-status")
    expect(status).to_have_text("Model gpt is busy; retrying now.")
    gate.release()
    expect(page.locator(ANSWER)).to_have_text("Hello!")
    expect(status).to_have_count(0)
    thinking = page.locator(".message.assistant .reasoning")
    thought = thinking.locator(".reasoning-text")
    expect(thought).to_be_hidden()  # folded away
    thinking.locator("summary").click()
    expect(thought).to_have_text("They greet me; greet back.")


def test_a_call_shows_its_arguments_and_asks_then_the_reply_goes_on(
    make_hub: HubFactory, model_standin: ModelStandIn, open_page: OpenPage
) -> None:
    hub = make_hub(**standin_models(model_standin))
    model_standin.reply(Text("Provisioning."), ToolCall("mrtr__provision", {"name": "orders"}, pieces=3))
    model_standin.reply(Text("Done: orders is in eu-west-1."))
    page = open_page(hub)
    say(page, "Provision orders.")
    prompt = page.locator(".prompt")
    expect(prompt).to_have_attribute("data-state", "pending")
    tool = page.locator(".message.assistant .tool")
    expect(tool.locator("code")).to_have_text("mrtr.provision")
    expect(tool.locator("pre").first).to_have_text('{ "name": "orders" }')  # in its folded Arguments
    prompt.get_by_label("Region").select_option("eu-west-1")
    prompt.get_by_role("button", name="Submit").click()
    expect(tool.locator(".tool-status")).to_have_text("done")
    expect(page.locator(ANSWER)).to_have_text(["Provisioning.", "Done: orders is in eu-west-1."])


STREAMS = """async (streams) => {
    const { Steps } = await import("./static/steps.js");
    const reply = document.createElement("div");
    const steps = new Steps((node) => reply.appendChild(node), (parent, child) => parent.append(child));
    for (const { resumed, parts } of streams) {
        steps.restart(resumed);
        for (const part of parts) steps.apply(part);
    }
    return [...reply.querySelectorAll(".text, .reasoning-text")].map((node) => node.textContent);
}"""


def text_parts(part_id: str, *deltas: str, end: bool = True) -> list[dict[str, str]]:
    parts = [
        {"type": "text-start", "id": part_id},
        *({"type": "text-delta", "id": part_id, "delta": d} for d in deltas),
    ]
    return parts + ([{"type": "text-end", "id": part_id}] if end else [])


def test_a_stream_resumed_inside_a_turn_goes_on_in_the_text_that_was_growing(
    hub: RunningHub, open_page: OpenPage
) -> None:
    """A stream names its parts from its own start: one that resumes after a broken one (`Last-Event-ID` inside a
    turn) brings the rest of the text then growing under an id the reply used before, for another text."""
    page = open_page(hub)
    call = {"type": "tool-input-available", "toolCallId": "c1", "toolName": "mrtr.status", "input": {}}
    broken = [*text_parts("m_t1", "Let me look."), call, *text_parts("m_t2", "It shipped on Mo", end=False)]
    rest = [{"type": "start"}, {"type": "start-step"}, *text_parts("m_t1", "nday."), *text_parts("m_t2", "Bye.")]
    resumed = page.evaluate(STREAMS, [{"resumed": False, "parts": broken}, {"resumed": True, "parts": rest}])
    assert resumed == ["Let me look.", "It shipped on Monday.", "Bye."]
    # A stream that does not resume one starts parts of its own, whatever their ids.
    again = page.evaluate(STREAMS, [{"resumed": False, "parts": broken}, {"resumed": False, "parts": rest}])
    assert again == ["Let me look.", "It shipped on Mo", "nday.", "Bye."]
