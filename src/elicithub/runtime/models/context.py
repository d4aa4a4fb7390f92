"""Which of a conversation's messages a model request sends, so that it fits the model's context window (no I/O).

The walk goes back from the newest message and stops at the first thing that does not fit, so a request costs what
it keeps, however long the conversation (DESIGN v5, Models, Context). Words used here:

- a *unit* is a message with the tool messages right after it: an assistant message with its calls' results, or
  any other message alone. A unit is sent whole or not at all, so a call never goes without its result, nor a
  result without its call.
- a *turn* is a user message and every message after it up to the next user message; the messages before the
  first user message (a system prompt, a greeting) are the oldest turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from elicithub.core.runs import Message

MESSAGE_OVERHEAD = 4
"""What a provider adds around each message (its role, separators): OpenAI documents 3 or 4 tokens."""


def estimate_tokens(text: str) -> int:
    """A token count for `text` that errs high, without a tokenizer (the hub has none to download).

    One token per 3 bytes of UTF-8, rounded up. The BPE tokenizers of current models average about 4 bytes per
    token on English prose and code, and a CJK character (3 bytes) is about one token, so this counts more tokens
    than the model will for the text conversations hold: a request is trimmed a little early rather than refused
    by the provider.
    """
    size = len(text) if text.isascii() else len(text.encode())
    return -(-size // 3)


def message_tokens(message: Message) -> int:
    """What one message costs a request: its content, its tool calls, the call a result answers, and an overhead.

    Pure and cheap, but a caller that asks before every request may keep each message's count beside it."""
    calls = message.get("tool_calls")
    tokens = MESSAGE_OVERHEAD + _content_tokens(message.get("content")) + _content_tokens(calls or None)
    return tokens + estimate_tokens(message.get("tool_call_id", ""))


def fit(messages: Sequence[Message], budget: int, fixed: int = 0) -> list[Message]:
    """The messages a request sends so that, with `fixed`, they cost at most `budget`; in their original order.

    `budget` is the model's `context_tokens` less its `max_tokens`; `fixed` is what every request costs besides
    the messages (the instructions and the tool definitions). The rules, in order:

    1. The newest unit always goes, even if it alone is over the budget: a budget trims, it never fails a run.
       That is the newest message, with the assistant message that called it and all its results when it is a
       tool result.
    2. Then the newest turn's earlier units, from the newest back, while they fit. If the whole turn fits, the
       result is a suffix of the conversation and the walk goes on with step 3.
       If it does not (a long run of tool calls), the user message that opened it goes first, when it fits
       beside the newest unit, and then as many of the turn's newest units as fit after it: what the person
       asked outweighs the oldest steps taken to answer it. The result is that message followed by a suffix of
       whole units, and nothing older.
    3. Then whole turns, from the newest back, while they fit. The first turn that does not fit ends the walk:
       an older turn is never sent with a gap after it.

    Given a conversation whose tool results follow the message that called them, the result never holds a call
    without its result, a result without its call, or a tool message at its start.
    """
    if not messages:
        return []
    first = _unit_start(messages, len(messages))
    room = spare = budget - fixed - _tokens(messages, first, len(messages))
    cut = first
    kept: list[tuple[int, int]] = []  # (start, tokens) of the newest turn's units kept after the first, newest first
    while cut > 0 and messages[cut]["role"] != "user":
        start = _unit_start(messages, cut)
        tokens = _tokens(messages, start, cut)
        if tokens > room:
            return _trimmed_turn(messages, start, first, kept, spare)
        kept.append((start, tokens))
        cut, room = start, room - tokens
    while cut > 0:
        start, tokens = cut, 0
        while True:  # back to the user message that opens the turn before `cut`, or to the first message
            start -= 1
            tokens += message_tokens(messages[start])
            if tokens > room:
                return list(messages[cut:])
            if start == 0 or messages[start]["role"] == "user":
                break
        cut, room = start, room - tokens
    return list(messages[cut:])


def _trimmed_turn(
    messages: Sequence[Message], unfit: int, first: int, kept: list[tuple[int, int]], spare: int
) -> list[Message]:
    """Step 2 when the newest turn does not fit: its opening user message if it fits, then its newest units.

    `unfit` is where the unit that did not fit starts; `kept` the units that fitted without the opening message,
    newest first; `spare` the room the newest unit left."""
    opening = next((i for i in range(unfit, -1, -1) if messages[i]["role"] == "user"), None)
    head: list[Message] = []
    if opening is not None and (tokens := message_tokens(messages[opening])) <= spare:
        head, spare = [messages[opening]], spare - tokens
    start = first
    for unit_start, tokens in kept:
        if tokens > spare:
            break
        start, spare = unit_start, spare - tokens
    return [*head, *messages[start:]]


def _unit_start(messages: Sequence[Message], end: int) -> int:
    """Where the unit that ends before `end` starts: at the nearest message before it that is not a tool result."""
    start = end - 1
    while start > 0 and messages[start]["role"] == "tool":
        start -= 1
    return start


def _tokens(messages: Sequence[Message], start: int, end: int) -> int:
    return sum(message_tokens(messages[i]) for i in range(start, end))


def _content_tokens(content: object) -> int:
    if content is None:
        return 0
    # Parts, an answer's JSON and tool calls cost their JSON text: more than their words, never less, and a
    # client's odd shapes are counted rather than refused.
    text = content if isinstance(content, str) else json.dumps(content, separators=(",", ":"), ensure_ascii=False)
    return estimate_tokens(text)
