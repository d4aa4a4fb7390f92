"""What a model request sends of a long conversation: the budget rules of runtime/models/context.py, on plain values."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicithub.core.runs import Message
from elicithub.runtime.models import context
from elicithub.runtime.models.context import estimate_tokens, fit, message_tokens


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def reply(text: str) -> Message:
    return {"role": "assistant", "content": text}


def calls(*ids: str, arguments: str = "{}") -> Message:
    made = [{"id": i, "type": "function", "function": {"name": "tracker.find", "arguments": arguments}} for i in ids]
    return {"role": "assistant", "content": None, "tool_calls": made}  # type: ignore[typeddict-item]


def result(call_id: str, text: str = "ok") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text, "is_error": False}


def cost(messages: Sequence[Message]) -> int:
    return sum(message_tokens(m) for m in messages)


def turn(n: int, size: int = 30) -> list[Message]:
    """A user-led turn with a tool call in it: four messages."""
    return [user(f"question {n} " + "q" * size), calls(f"c{n}"), result(f"c{n}", "r" * size), reply(f"answer {n}")]


def test_estimate_rounds_up_a_token_per_three_bytes() -> None:
    assert [estimate_tokens(t) for t in ("", "a", "abc", "abcd")] == [0, 1, 1, 2]
    assert estimate_tokens("日本語") == 3  # nine bytes: a CJK character counts about a token, as tokenizers do
    assert estimate_tokens("x" * 4000) >= 1000  # more than English's four characters a token


def test_message_cost_counts_content_tool_calls_and_the_call_answered() -> None:
    assert message_tokens(user("")) == context.MESSAGE_OVERHEAD
    assert message_tokens(calls("c1", arguments=json.dumps({"q": "x" * 300}))) > 100 + message_tokens(calls("c1"))
    assert message_tokens(result("c1" * 30, "")) > message_tokens(result("c1", ""))
    parts: Message = {"role": "user", "content": [{"type": "text", "text": "y" * 300}]}
    assert message_tokens(parts) > 100
    odd: Message = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}  # type: ignore[typeddict-item]
    assert message_tokens(odd) > context.MESSAGE_OVERHEAD  # a client's odd shape is counted, not refused


def test_an_empty_conversation_sends_nothing() -> None:
    assert fit([], 1000) == []


def test_a_conversation_that_fits_goes_whole() -> None:
    messages: list[Message] = [{"role": "system", "content": "be brief"}, *turn(1), *turn(2), user("and now?")]
    assert fit(messages, cost(messages)) == messages


def test_the_newest_message_goes_even_when_it_alone_is_over_the_budget() -> None:
    messages = [*turn(1), user("z" * 3000)]
    assert fit(messages, 10) == [messages[-1]]
    assert fit(messages, 10, fixed=10_000) == [messages[-1]]


def test_a_budget_of_zero_sends_the_newest_call_with_all_its_results() -> None:
    messages = [*turn(1), user("look both up"), calls("a", "b"), result("a"), result("b")]
    assert fit(messages, 0) == messages[-3:]
    assert fit(messages, -5) == messages[-3:]


def test_the_fixed_cost_is_counted_against_the_budget() -> None:
    messages = [*turn(1), *turn(2), user("and now?")]
    budget = cost(messages)
    assert fit(messages, budget, fixed=0) == messages
    assert fit(messages, budget, fixed=1) == messages[4:]  # the oldest turn no longer fits beside the instructions


def test_whole_turns_go_from_the_newest_back_and_the_first_that_does_not_fit_ends_the_walk() -> None:
    small, big = turn(1, size=3), turn(2, size=600)
    messages = [*small, *big, *turn(3), user("next")]
    budget = cost(messages) - cost(big)  # room for all but the big turn: the small one before it still stays out
    assert fit(messages, budget) == messages[8:]
    assert fit(messages, cost(messages[4:])) == messages[4:]


def test_a_turn_is_never_cut_before_the_newest_one() -> None:
    messages = [*turn(1), *turn(2), user("next")]
    for budget in range(cost(messages) + 1):
        sent = fit(messages, budget)
        assert sent in (messages, messages[4:], messages[8:])


def test_a_newest_turn_too_big_keeps_the_question_and_its_newest_steps() -> None:
    question = user("find the three open bugs")
    steps = [calls("a"), result("a", "x" * 300), calls("b"), result("b", "y" * 300), calls("c"), result("c", "z")]
    messages = [*turn(1), question, *steps]
    budget = cost([question, *steps[2:]])  # the oldest step does not fit
    assert fit(messages, budget) == [question, *steps[2:]]
    assert fit(messages, budget - 1) == [question, *steps[4:]]


def test_a_question_too_big_to_fit_gives_way_to_the_newest_steps() -> None:
    question = user("summarise this: " + "d" * 3000)
    steps = [calls("a"), result("a", "x" * 30), calls("b"), result("b", "y")]
    messages = [question, *steps]
    assert fit(messages, cost(steps)) == steps
    assert fit(messages, cost(steps) - 1) == steps[2:]


def test_a_question_goes_before_older_steps_of_its_turn() -> None:
    question = user("q" * 60)
    steps = [calls("a"), result("a", "x" * 60), calls("b"), result("b", "y" * 60)]
    messages = [question, *steps]
    # Without the question both steps would fit; with it only the newest does, and the question wins.
    assert fit(messages, cost(steps) + 1) == [question, *steps[2:]]


def test_a_step_that_does_not_fit_ends_the_walk_through_the_newest_turn() -> None:
    question = user("find it")
    small, big, newest = [calls("a"), result("a")], [calls("b"), result("b", "x" * 600)], [calls("c"), result("c")]
    messages = [question, *small, *big, *newest]
    assert fit(messages, cost([question, *small, *newest])) == [question, *newest]
    # Also when the steps fitted on their own and the question, which goes first, leaves room for the small one only.
    question = user("q" * 150)
    messages = [question, *small, *big, *newest]
    assert fit(messages, cost([*small, *big, *newest])) == [question, *newest]


def test_every_cut_keeps_calls_with_their_results() -> None:
    messages = [
        *turn(1),
        user("compare them"),
        calls("a", "b", "c"),
        result("a", "x" * 90),
        result("b", "y" * 10),
        result("c"),
        calls("d"),
        result("d", "w" * 40),
    ]
    for budget in range(cost(messages) + 2):
        assert_well_formed(messages, fit(messages, budget), budget, 0)


def test_five_hundred_turns_send_and_cost_what_a_conversation_that_just_fits_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    long = [message for n in range(500) for message in turn(n)] + [user("what now?")]
    budget = 2000
    sent = fit(long, budget)
    assert sent[-1] == long[-1] and 0 < len(sent) < len(long)
    assert cost(sent) <= budget
    assert fit(sent, budget) == sent  # it is exactly a conversation that just fits...
    assert cost(long[-len(sent) - 4 :]) > budget  # ...with one turn more it would not
    assert len(long[-401:]) > 2 * len(sent)
    assert counted(monkeypatch, lambda: fit(long, budget)) == counted(monkeypatch, lambda: fit(long[-401:], budget))


def counted(monkeypatch: pytest.MonkeyPatch, call: Callable[[], object]) -> int:
    """How many messages' costs `call` estimates."""
    seen = 0
    estimate = context.message_tokens

    def counting(message: Message) -> int:
        nonlocal seen
        seen += 1
        return estimate(message)

    with monkeypatch.context() as patch:
        patch.setattr(context, "message_tokens", counting)
        call()
    return seen


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Well-formed conversations: an optional system message, then user-led turns of replies and tool calls, each
    call's results right after it; the newest turn may end after any message."""
    text = st.integers(0, 400).map(lambda n: "t" * n)
    messages: list[Message] = [{"role": "system", "content": draw(text)}] if draw(st.booleans()) else []
    ids = iter(range(10_000))
    for _ in range(draw(st.integers(1, 8))):
        messages.append(user(draw(text)))
        for _ in range(draw(st.integers(0, 4))):
            width = draw(st.integers(0, 3))
            if width == 0:
                messages.append(reply(draw(text)))
                continue
            made = [f"call_{next(ids)}" for _ in range(width)]
            messages.append(calls(*made, arguments=json.dumps({"q": draw(text)})))
            messages.extend(result(i, draw(text)) for i in made)
    return messages


@given(conversations(), st.integers(-10, 3000), st.integers(0, 500))
def test_what_is_sent_is_always_whole_units_within_the_budget(messages: list[Message], budget: int, fixed: int) -> None:
    assert_well_formed(messages, fit(messages, budget, fixed), budget, fixed)


def assert_well_formed(messages: list[Message], sent: list[Message], budget: int, fixed: int) -> None:
    assert sent and sent[-1] is messages[-1]
    assert sent[0]["role"] != "tool"
    called = {c["id"] for m in sent for c in m.get("tool_calls", [])}
    answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert called == answered
    start = index_of(messages, sent[0])
    if sent != messages[start:]:  # a trimmed newest turn: its question, then a suffix of that turn
        assert sent[0]["role"] == "user"
        rest = index_of(messages, sent[1])
        assert sent[1:] == messages[rest:] and messages[rest]["role"] != "tool"
        assert all(m["role"] != "user" for m in messages[start + 1 :])
    newest = newest_unit(messages)
    assert cost(sent) + fixed <= budget or sent == newest
    if sent == messages[start:] and start > 0 and sent[0]["role"] == "user":
        before = start - 1
        while before > 0 and messages[before]["role"] != "user":
            before -= 1
        assert cost(messages[before:]) + fixed > budget  # the turn before it did not fit


def newest_unit(messages: list[Message]) -> list[Message]:
    start = len(messages) - 1
    while start > 0 and messages[start]["role"] == "tool":
        start -= 1
    return messages[start:]


def index_of(messages: list[Message], message: Any) -> int:
    return next(i for i, m in enumerate(messages) if m is message)
