"""Every backend does `send` and a run's finish each in one step: no writer loses, none adds a message twice, and a
run that is no longer its conversation's active run commits nothing."""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from elicithub.core.ports import Added, Backend
from elicithub.core.runs import ConversationRecord, Message, RunRecord
from tests.store.test_conversation_messages import KEY, conversation, said, stored, write_old_conversation

pytestmark = pytest.mark.anyio


def to(*run_ids: str) -> list[Message]:
    return [{"role": "user", "content": f"to {run_id}"} for run_id in run_ids]


def message(run_id: str, *, seed: list[Message] | None = None, at: float = 1000.25) -> ConversationRecord:
    """What `Conversations.send` hands the store: the conversation as it would be new, its last message to add."""
    return ConversationRecord(KEY, "chat-1", "alice", [*(seed or []), *to(run_id)], run_id, updated_at=at)


def finished(run_id: str, history: list[Message], own: list[Message], at: float = 2000.5) -> RunRecord:
    return RunRecord(
        run_id, "chat-1", "alice", True, [*history, *own], status="finished", owner="hub_a", updated_at=at,
        history=len(history),
    )  # fmt: skip


async def test_send_makes_a_new_conversation_with_its_seed_and_the_message(backend: Backend) -> None:
    added = await backend.conversations.send(message("run_1", seed=said("earlier", "reply")))
    assert added is not None and added.previous is None
    written = added.written
    assert (written.version, written.active_run_id, written.active_run_after, written.stored) == (1, "run_1", 0, 3)
    read = await stored(backend)
    assert read.messages == [*said("earlier", "reply"), *to("run_1")]
    # Read back as written, to the time: a hub that holds the messages knows this write by its version and time.
    assert replace(read, messages=[]) == replace(written, messages=[]) and read.stored == 3


async def test_send_adds_only_its_message_and_supersedes_the_active_run(backend: Backend) -> None:
    await backend.conversations.send(message("run_1"))
    for n in range(2):
        await backend.events.append(KEY, {"n": n})
    # A seed sent to a conversation that exists is not added: the store has its messages.
    added = await backend.conversations.send(message("run_2", seed=said("ignored"), at=1000.75))
    assert added is not None and added.previous is not None
    assert (added.previous.active_run_id, added.previous.version, added.previous.stored) == ("run_1", 1, 1)
    written = added.written
    # The log position is its newest seq as the message was added: the new run's events come after it.
    assert (written.version, written.active_run_id, written.active_run_after, written.stored) == (2, "run_2", 2, 2)
    read = await stored(backend)
    assert read.messages == to("run_1", "run_2") and read.updated_at == 1000.75


async def test_sends_at_once_all_go_in_each_superseding_the_one_before(backend: Backend) -> None:
    results: list[Added] = []

    async def send(i: int) -> None:
        added = await backend.conversations.send(message(f"run_{i}"))
        assert added is not None
        results.append(added)

    async with anyio.create_task_group() as group:
        for i in range(10):
            group.start_soon(send, i)
    results.sort(key=lambda a: a.written.version)
    assert [a.written.version for a in results] == list(range(1, 11))
    assert [a.written.stored for a in results] == list(range(1, 11))
    # Each run is superseded by exactly the next: none is lost between two writers.
    superseded = [a.previous.active_run_id if a.previous is not None else None for a in results]
    assert superseded == [None, *(a.written.active_run_id for a in results[:-1])]
    read = await stored(backend)
    assert read.messages == [m for a in results for m in to(str(a.written.active_run_id))]
    assert read.active_run_id == results[-1].written.active_run_id


async def test_send_leaves_a_record_of_the_earlier_form_to_a_compare_and_set(backend: Backend) -> None:
    if not backend.durable:
        pytest.skip("an in-process store keeps no records of an earlier version")
    await write_old_conversation(backend, {**conversation([]).to_json(), "messages": said("hi"), "active_run_id": "r"})
    assert await backend.conversations.send(message("run_1")) is None
    read = await stored(backend)
    assert read.messages == said("hi") and read.active_run_id == "r" and read.version == 1


async def test_a_finishing_run_that_is_active_commits_what_it_said_with_its_record(backend: Backend) -> None:
    await backend.conversations.send(message("run_1"))
    run = finished("run_1", to("run_1"), [{"role": "assistant", "content": "done"}])
    assert await backend.runs.finish(run) == 2
    read = await stored(backend)
    assert read.messages == [*to("run_1"), {"role": "assistant", "content": "done"}]
    assert (read.active_run_id, read.version, read.updated_at) == (None, 2, 2000.5)
    assert await backend.runs.get("run_1") == run
    assert [r.run_id for r in await backend.runs.unfinished()] == []
    # Finished once: a second finish finds it no longer active.
    assert await backend.runs.finish(run) is None
    assert (await stored(backend)).version == 2


async def test_a_finishing_run_that_was_superseded_saves_its_record_and_commits_nothing(backend: Backend) -> None:
    await backend.conversations.send(message("run_1"))
    await backend.runs.save(replace(finished("run_1", to("run_1"), []), status="running"))
    await backend.conversations.send(message("run_2"))
    run = finished("run_1", to("run_1"), [{"role": "assistant", "content": "late"}])
    assert await backend.runs.finish(run) is None
    read = await stored(backend)
    assert read.messages == to("run_1", "run_2") and (read.active_run_id, read.version) == ("run_2", 2)
    assert await backend.runs.get("run_1") == run
    assert [r.run_id for r in await backend.runs.unfinished()] == []


async def test_a_finish_and_a_send_at_once_keep_the_run_s_words_or_none_of_them(backend: Backend) -> None:
    for attempt in range(5):
        await backend.conversations.send(message(f"run_{attempt}"))
        before = (await stored(backend)).messages
        run = finished(f"run_{attempt}", before, [{"role": "assistant", "content": f"said {attempt}"}])
        outcome: dict[str, int | Added | None] = {}

        async def finish(run: RunRecord = run, outcome: dict[str, int | Added | None] = outcome) -> None:
            outcome["finish"] = await backend.runs.finish(run)

        async def send(attempt: int = attempt, outcome: dict[str, int | Added | None] = outcome) -> None:
            outcome["send"] = await backend.conversations.send(message(f"next_{attempt}"))

        async with anyio.create_task_group() as group:
            group.start_soon(finish)
            group.start_soon(send)
        read = await stored(backend)
        words = [{"role": "assistant", "content": f"said {attempt}"}] if outcome["finish"] is not None else []
        assert read.messages == [*before, *words, *to(f"next_{attempt}")]
        assert read.active_run_id == f"next_{attempt}"
        sent = outcome["send"]
        assert isinstance(sent, Added) and sent.previous is not None
        # The send superseded the run only if it came first.
        assert (sent.previous.active_run_id == run.run_id) == (outcome["finish"] is None)
