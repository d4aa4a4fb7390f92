"""The OpenAI-compatible stream's chunks: each is a `chat.completion.chunk` of its named shape, a question riding as
the JSON text of its delta."""

from __future__ import annotations

import json

from elicithub.core.events import ElicitationRequested, ElicitationResolved, RunFinished, TextDelta
from elicithub.surfaces.chat.openai_sse import DONE, Choice, Chunk, Delta, OpenAIChunkWriter
from tests.core_fixtures import question
from tests.shapes import assert_shaped


def test_every_chunk_has_the_keys_of_its_shape_and_a_question_rides_in_its_content() -> None:
    asked = question()
    writer = OpenAIChunkWriter("assistant")
    events = [TextDelta("Which region?"), ElicitationRequested(asked), ElicitationResolved(asked.id, "accepted")]
    lines = [*writer.start(), *(line for event in events for line in writer.write(event)), *writer.write(RunFinished())]
    assert lines[-1] == DONE
    chunks = [json.loads(line) for line in lines[:-1]]
    for chunk in chunks:
        assert_shaped(chunk, Chunk)
        [choice] = chunk["choices"]
        assert_shaped(choice, Choice)
        assert_shaped(choice["delta"], Delta)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, None, None, "stop"]
    request = json.loads(chunks[2]["choices"][0]["delta"]["content"])
    assert (request["type"], request["elicitationId"]) == ("elicitation-request", asked.id)
