"""The messages a hub keeps of the conversations it wrote: served only for the very write they were kept for."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from elicithub.core.events import RunFinished
from elicithub.core.ports import Backend
from elicithub.core.runs import ConversationRecord, Message
from elicithub.runtime.histories import Histories
from tests.runtime.test_conversations import ALICE, events_until, instance, started

pytestmark = pytest.mark.anyio


def said(n: int) -> list[Message]:
    return [{"role": "user", "content": f"m{i}"} for i in range(n)]


def written(key: str, n: int, version: int = 2, at: float = 10.0) -> ConversationRecord:
    return ConversationRecord(key, "c", "alice", said(n), version=version, updated_at=at, stored=n - 1)


def light(record: ConversationRecord) -> ConversationRecord:
    """As the store gives it back without its messages."""
    return replace(record, messages=[], stored=len(record.messages))


def test_messages_are_served_only_for_the_write_they_were_kept_for() -> None:
    histories = Histories()
    record = written("k", 3)
    histories.saw(record)
    served = histories.with_messages(light(record))
    assert served is not None and served.messages == said(3) and served.stored == 3
    assert histories.with_messages(light(replace(record, version=3))) is None  # written since
    assert histories.with_messages(light(replace(record, updated_at=11.0))) is None  # another write of that version
    assert histories.with_messages(replace(light(record), stored=4)) is None
    assert histories.with_messages(light(written("other", 3))) is None


def test_a_record_written_without_all_its_messages_is_forgotten() -> None:
    histories = Histories()
    histories.saw(written("k", 3))
    stopped = replace(light(written("k", 3)), version=3)  # a stop writes the record read without messages
    histories.saw(stopped)
    assert histories.with_messages(light(written("k", 3))) is None
    assert histories.with_messages(stopped) is None


def test_the_least_recently_used_are_forgotten_past_the_limit() -> None:
    histories = Histories(max_messages=10)
    for key in ("a", "b", "c"):
        histories.saw(written(key, 4))
    assert histories.with_messages(light(written("a", 4))) is None  # 12 > 10: the oldest went
    assert histories.with_messages(light(written("b", 4))) is not None  # used: now the newest
    histories.saw(written("d", 4))
    assert histories.with_messages(light(written("c", 4))) is None
    assert histories.with_messages(light(written("b", 4))) is not None
    histories.saw(written("huge", 11))  # larger than the limit: never kept
    assert histories.with_messages(light(written("huge", 11))) is None


def test_conversations_not_written_since_the_time_given_are_forgotten() -> None:
    histories = Histories()
    for key, at in (("old", 10.0), ("new", 20.0)):
        histories.saw(written(key, 3, at=at))
    histories.forget_idle(idle_before=10.0)  # none written before it
    assert len(histories) == 2
    histories.forget_idle(idle_before=20.0)
    assert len(histories) == 1
    assert histories.with_messages(light(written("old", 3, at=10.0))) is None
    assert histories.with_messages(light(written("new", 3, at=20.0))) is not None


async def test_the_purge_forgets_the_messages_held_of_conversations_idle_past_it(backend: Backend) -> None:
    async with instance(backend) as hub:
        for n in range(3):
            _, events = await started(hub, ALICE, f"chat-{n}", "x" * 16 * 1024)
            await events_until(events, RunFinished)
        held = hub.conversations.runner.histories
        written_at = [(await hub.conversations.get(ALICE, f"chat-{n}", messages=False)).updated_at for n in range(3)]
        assert len(held) == 3
        assert await hub.conversations.purge(idle_before=min(written_at)) == 0  # none idle that long: all kept
        assert len(held) == 3
        purged = await hub.conversations.purge(idle_before=math.nextafter(max(written_at), math.inf))
        assert len(held) == 0
    assert purged == (0 if backend.url.startswith("redis://") else 3)  # Redis lets them expire by themselves


async def test_a_hub_reads_again_a_conversation_another_hub_wrote_since(backend: Backend) -> None:
    async with instance(backend, "hub-a") as a, instance(backend, "hub-b") as b:
        for hub, text in ((a, "one"), (b, "two"), (a, "three")):
            _, events = await started(hub, ALICE, "chat-h", text)
            await events_until(events, RunFinished)
        record = await a.conversations.get(ALICE, "chat-h")
    assert [m["content"] for m in record.messages if m["role"] == "user"] == ["one", "two", "three"]
    assert len(record.messages) == 6


async def test_a_conversation_begun_again_elsewhere_under_a_purged_ones_key_is_read_again(backend: Backend) -> None:
    if backend.url.startswith("redis://"):
        pytest.skip("Redis forgets idle conversations by their TTL, not by a purge")
    async with instance(backend, "hub-a") as a, instance(backend, "hub-b") as b:
        _, events = await started(a, ALICE, "chat-p", "before")
        await events_until(events, RunFinished)
        assert await backend.conversations.purge(idle_before=1e12) >= 1
        # hub-b begins it again and brings it to the version hub-a last wrote, at another time.
        _, events = await started(b, ALICE, "chat-p", "after")
        await events_until(events, RunFinished)
        sent = await a.conversations.send(ALICE, "chat-p", "again")
        followed = await a.conversations.follow(ALICE, "chat-p", sent.run_id, sent.after)
        await events_until(followed.events, RunFinished)
        run = await backend.runs.get(sent.run_id)  # what hub-a's model was given
    assert run is not None
    assert [m["content"] for m in run.messages if m["role"] == "user"] == ["after", "again"]
