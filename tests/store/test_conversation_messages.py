"""Every backend keeps a conversation's messages once each, in a list apart that only grows, and runs refer to it;
records of earlier versions, with their messages inline, still read."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from typing import Any

import anyio
import pytest

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import Backend
from elicithub.core.runs import ConversationRecord, Message, RunRecord, conversation_key
from elicithub.store.redis.client import PREFIX

pytestmark = pytest.mark.anyio

KEY = conversation_key("alice", "chat-1")


def said(*texts: str) -> list[Message]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(texts)]


def conversation(messages: list[Message], **changes: Any) -> ConversationRecord:
    return replace(ConversationRecord(KEY, "chat-1", "alice", messages, version=1, updated_at=1000.0), **changes)


async def stored(backend: Backend) -> ConversationRecord:
    found = await backend.conversations.get(KEY)
    assert found is not None
    return found


async def test_a_write_adds_only_the_messages_said_since_the_record_was_read(backend: Backend) -> None:
    store = backend.conversations
    assert await store.put(conversation(said("hi", "hello")), None)
    read = await stored(backend)
    assert read.messages == said("hi", "hello") and read.stored == 2
    # What the writer holds before `stored` is not written again: the list keeps what it has.
    rewritten = [{"role": "user", "content": "changed"}, *said("hi", "hello", "more")[1:]]
    assert await store.put(replace(read, messages=rewritten, version=2), 1)
    assert (await stored(backend)).messages == said("hi", "hello", "more")


async def test_a_record_read_without_its_messages_counts_them_and_a_write_from_it_appends(backend: Backend) -> None:
    store = backend.conversations
    await store.put(conversation(said("hi", "hello"), active_run_id="run_1", active_run_after=7), None)
    light = await store.get(KEY, messages=False)
    assert light is not None and light.messages == [] and light.stored == 2
    assert (light.active_run_id, light.active_run_after, light.version) == ("run_1", 7, 1)
    assert await store.get("u:alice/unknown", messages=False) is None
    # As a finishing run writes: the record read without messages, with the run's whole list put in.
    assert await store.put(replace(light, messages=said("hi", "hello", "q", "a"), active_run_id=None, version=2), 1)
    # As a stop writes: nothing said, nothing added.
    after = await store.get(KEY, messages=False)
    assert after is not None and after.stored == 4
    assert await store.put(replace(after, active_run_id="run_2", version=3), 2)
    final = await stored(backend)
    assert final.messages == said("hi", "hello", "q", "a") and final.active_run_id == "run_2"


async def test_a_writer_that_loses_the_compare_and_set_adds_no_message(backend: Backend) -> None:
    store = backend.conversations
    await store.put(conversation(said("hi")), None)
    read = await stored(backend)
    results: dict[int, bool] = {}

    async def write(i: int) -> None:
        results[i] = await store.put(replace(read, messages=said("hi", f"from {i}"), version=2), 1)

    async with anyio.create_task_group() as group:
        for i in range(10):
            group.start_soon(write, i)
    [winner] = [i for i, won in results.items() if won]
    assert (await stored(backend)).messages == said("hi", f"from {winner}")
    assert not await store.put(conversation(said("x", "y")), None)  # already there: nothing added either
    assert (await stored(backend)).messages == said("hi", f"from {winner}")


async def test_a_run_reads_back_the_history_it_started_from_and_saves_only_its_own(backend: Backend) -> None:
    await backend.conversations.put(conversation(said("hi", "hello", "/call t.ask")), None)
    own: list[Message] = [{"role": "tool", "tool_call_id": "call_1", "content": "done"}]
    history = said("hi", "hello", "/call t.ask")
    run = RunRecord("run_1", "chat-1", "alice", True, [*history, *own], owner="hub_a", history=3)
    await backend.runs.save(run)
    # The conversation goes on; the run still reads the messages it started from.
    read = await stored(backend)
    await backend.conversations.put(replace(read, messages=[*read.messages, *said("later")], version=2), 1)
    assert await backend.runs.get("run_1") == run
    light = await backend.runs.get("run_1", messages=False)
    assert light is not None and light.messages == [] and light.owner == "hub_a"
    assert [r.messages for r in await backend.runs.unfinished()] == [[]]
    if backend.durable:
        assert (await raw_run(backend, "run_1"))["messages"] == own


async def test_records_of_the_earlier_version_with_messages_inline_still_read_and_move_on_write(
    backend: Backend,
) -> None:
    if not backend.durable:
        pytest.skip("an in-process store keeps no records of an earlier version")
    inline = {**conversation([]).to_json(), "messages": said("hi", "hello"), "active_run_id": "run_1"}
    await write_old_conversation(backend, inline)
    run = RunRecord("run_1", "chat-1", "alice", True, said("hi"), owner="hub_a")
    await write_old_run(backend, {k: v for k, v in run.to_json().items() if k != "history"})
    assert await backend.runs.get("run_1") == run
    light = await backend.conversations.get(KEY, messages=False)
    assert light is not None and light.active_run_id == "run_1"
    assert (await stored(backend)).messages == said("hi", "hello")
    # The first write, from either read, puts every message in the list.
    assert await backend.conversations.put(replace(light, messages=said("hi", "hello", "q"), version=2), 1)
    assert (await stored(backend)).messages == said("hi", "hello", "q")
    read = await stored(backend)
    assert await backend.conversations.put(replace(read, messages=said("hi", "hello", "q", "a"), version=3), 2)
    assert (await stored(backend)).messages == said("hi", "hello", "q", "a")


async def test_a_purged_conversation_takes_its_messages_with_it(backend: Backend) -> None:
    store = backend.conversations
    await store.put(conversation(said("old", "older", "oldest"), updated_at=100.0), None)
    if backend.url.startswith("redis://"):
        client = backend._redis  # type: ignore[attr-defined]
        ttl = await client.ttl(f"{PREFIX}conversation-messages:{KEY}")
        assert 0 < ttl <= await client.ttl(f"{PREFIX}conversation:{KEY}") + 1  # they expire together
        return
    assert await store.purge(idle_before=200.0) == 1
    assert await store.get(KEY) is None
    assert await store.put(conversation(said("new")), None)  # the same key again: a new conversation
    assert (await stored(backend)).messages == said("new")


# Records as the previous version wrote them, straight into each durable store.


async def write_old_conversation(backend: Backend, data: JsonObject) -> None:
    text = json.dumps(data)
    if backend.url.startswith("sqlite"):
        row = (data["key"], data["version"], 1, data["updated_at"], text)
        await backend._db.run(lambda db: db.execute("INSERT INTO conversations VALUES (?, ?, ?, ?, ?)", row))  # type: ignore[attr-defined]
    elif backend.url.startswith("redis"):
        hash_key = f"{PREFIX}conversation:{data['key']}"
        await backend._redis.hset(hash_key, mapping={"version": str(data["version"]), "data": text})  # type: ignore[attr-defined]
    else:
        pool = await backend._db.pool()  # type: ignore[attr-defined]
        insert = "INSERT INTO elicithub_conversations VALUES ($1, $2, true, $3, $4)"
        await pool.execute(insert, data["key"], data["version"], data["updated_at"], text)


async def write_old_run(backend: Backend, data: JsonObject) -> None:
    text = json.dumps(data)
    if backend.url.startswith("sqlite"):
        row = (data["run_id"], data["status"], data["owner"], data["updated_at"], text)
        await backend._db.run(lambda db: db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?)", row))  # type: ignore[attr-defined]
    elif backend.url.startswith("redis"):
        client = backend._redis  # type: ignore[attr-defined]
        await client.mset({f"{PREFIX}run:{data['run_id']}": text, f"{PREFIX}run-owner:{data['run_id']}": data["owner"]})
    else:
        pool = await backend._db.pool()  # type: ignore[attr-defined]
        insert = "INSERT INTO elicithub_runs VALUES ($1, $2, $3, $4, $5)"
        await pool.execute(insert, data["run_id"], data["status"], data["owner"], data["updated_at"], text)


async def raw_run(backend: Backend, run_id: str) -> JsonObject:
    if backend.url.startswith("sqlite"):

        def read(db: sqlite3.Connection) -> str:
            return str(db.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])

        text = await backend._db.run(read)  # type: ignore[attr-defined]
    elif backend.url.startswith("redis"):
        text = await backend._redis.get(f"{PREFIX}run:{run_id}")  # type: ignore[attr-defined]
    else:
        pool = await backend._db.pool()  # type: ignore[attr-defined]
        text = await pool.fetchval("SELECT data FROM elicithub_runs WHERE run_id = $1", run_id)
    data: JsonObject = json.loads(text)
    return data
