"""A conversation's history as runs see it: kept once with the conversation, whole again for a run that resumes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from elicithub.core.elicitation import Answer
from elicithub.core.events import ElicitationRequested, RunFinished, RunPaused, TextDelta
from elicithub.core.ports import Backend
from elicithub.core.runs import Message
from elicithub.store import open_backend
from tests.runtime.test_conversations import ALICE, ASK, events_until, instance, started

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "redis"])
async def durable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    url = request.getfixturevalue("redis_url") if request.param == "redis" else f"sqlite:///{tmp_path / 'hub.db'}"
    opened = open_backend(url)
    yield opened
    await opened.close()


async def test_a_run_continued_after_a_restart_has_the_whole_conversation(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path / 'hub.db'}")
    try:
        async with instance(backend, "hub-a") as a:
            conversation, events = await started(a, ALICE, "chat-long", "hello")
            await events_until(events, RunFinished)
            _, events = await started(a, ALICE, conversation, ASK)
            asked = next(e for e in await events_until(events, RunPaused) if isinstance(e, ElicitationRequested))
        # hub-a stopped while its run waited; it starts again and continues the run from its record.
        async with instance(backend, "hub-a") as again:
            assert await again.conversations.recover() == 1
            followed = await again.conversations.reattach(ALICE, conversation)
            assert followed is not None
            await again.conversations.answer(ALICE, asked.elicitation.id, Answer("accept", {"region": "eu"}))
            assert TextDelta("accepted: eu") in await events_until(followed.events, RunFinished)
            record = await again.conversations.get(ALICE, conversation)
        roles = [m["role"] for m in record.messages]
        assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant"]
        run = await backend.runs.get(asked.elicitation.run_id)
        assert run is not None and run.status == "finished"
        assert run.messages == record.messages and run.history == 3  # "hello", its reply, and the question's message
    finally:
        await backend.close()


async def test_a_history_an_openai_client_sends_is_kept_once_and_runs_refer_to_it(durable: Backend) -> None:
    history: list[Message] = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "reply"}]
    async with instance(durable) as hub:
        sent = await hub.conversations.send(ALICE, None, "/call t.echo {}", history=history)
        followed = await hub.conversations.follow(ALICE, sent.conversation_id, sent.run_id, sent.after)
        assert TextDelta("echoed") in await events_until(followed.events, RunFinished)
        record = await hub.conversations.get(ALICE, sent.conversation_id)
    assert record.messages[:3] == [*history, {"role": "user", "content": "/call t.echo {}"}]
    assert len(record.messages) == 6
    run = await durable.runs.get(sent.run_id)
    assert run is not None and run.history == 3 and run.messages == record.messages
