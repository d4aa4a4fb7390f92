"""`store copy` between every two durable backends: each record kind reads back the same through the target's ports,
the target goes on from where the source was, and what a copy refuses."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from elicithub.core.elicitation import Answer, State, utcnow
from elicithub.core.ports import Backend
from elicithub.core.runs import ConversationRecord, Pause, RunRecord, conversation_key
from elicithub.errors import StoreUnusable
from elicithub.store import open_backend
from elicithub.store.contents import BATCH
from elicithub.store.copy import copy_store
from tests.core_fixtures import RedisServer, question
from tests.store.test_conversation_messages import said, write_old_conversation

pytestmark = pytest.mark.anyio

KEY = conversation_key("alice", "chat-1")
OLD_KEY = conversation_key("alice", "chat-old")
SEALED = bytes(range(256))  # a sealed token: bytes that are not text
PAIRS = [
    ("sqlite", "postgres"),
    ("postgres", "redis"),
    ("redis", "sqlite"),
    ("sqlite", "redis"),
    ("redis", "postgres"),
    ("postgres", "sqlite"),
]


def store_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path, name: str) -> str:
    """An empty store of this kind: a new SQLite file, the session's Redis database 0 or Postgres database."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / name}.db"
    return str(request.getfixturevalue(f"{kind}_url"))


async def fill(backend: Backend) -> dict[str, str]:
    """One of every record kind, written through the ports as a hub writes them: a conversation whose first run
    finished and whose second waits on a question, its event log, an answered question, a record of the earlier
    form (messages inline), a sealed token, an expiring value, a list, and a place held under a limit (which is not
    copied). Returns the questions' ids."""
    first = RunRecord("run_1", "chat-1", "alice", True, said("hi"), owner="hub_a", history=1)
    added = await backend.conversations.send(
        ConversationRecord(KEY, "chat-1", "alice", said("hi"), active_run_id="run_1", updated_at=100.0)
    )
    assert added is not None
    await backend.runs.save(first)
    for n in range(3):
        await backend.events.append(KEY, {"type": "text", "n": n})
    finished = replace(first, messages=said("hi", "hello"), status="finished", updated_at=101.0)
    assert await backend.runs.finish(finished) == 2
    record = ConversationRecord(KEY, "chat-1", "alice", said("hi", "hello", "go"), active_run_id="run_2")
    assert await backend.conversations.send(replace(record, updated_at=102.0)) is not None
    pending = question(600, run_id="run_2", conversation_id="chat-1")
    await backend.elicitations.put(pending)
    pause = Pause("mcp", {"region": pending.id}, {"kind": "rerun"})
    await backend.runs.save(
        RunRecord("run_2", "chat-1", "alice", True, said("hi", "hello", "go"), history=3, pause=pause, status="paused")
    )
    await backend.events.append(KEY, {"type": "elicitation-requested", "id": pending.id})
    answered = question(600)
    await backend.elicitations.put(answered)
    assert await backend.elicitations.transition(answered.id, State.ACCEPTED, Answer("accept", {"r": 1}), utcnow())
    if backend.durable:
        old = {**ConversationRecord(OLD_KEY, "chat-old", "alice", version=4, updated_at=50.0).to_json()}
        await write_old_conversation(backend, {**old, "messages": said("from", "before")})
    await backend.kv.put("credential:tracker:alice", SEALED)
    await backend.kv.put("link-once:abc", b"once", ttl_s=3600)
    await backend.kv.put("gone", b"taken")
    assert await backend.kv.take("gone") == b"taken"
    for n in range(3):
        await backend.kv.add_entry("audit", f"entry_{n}", 3600 + n)
    assert (await backend.kv.hold("limits:runs:user:alice", "run_2", 3600, limit=8)).taken  # not copied
    return {"pending": pending.id, "answered": answered.id}


async def seen(backend: Backend, ids: dict[str, str]) -> dict[str, Any]:
    """Everything `fill` wrote, as a hub reads it through the ports."""
    later = utcnow() + timedelta(days=1)
    return {
        "questions": [await backend.elicitations.get(i) for i in ids.values()],
        "due": [e.id for e in await backend.elicitations.due(later)],
        "runs": [await backend.runs.get(r) for r in ("run_1", "run_2")],
        "unfinished": [r.run_id for r in await backend.runs.unfinished()],
        "conversation": await backend.conversations.get(KEY),
        "old": await backend.conversations.get(OLD_KEY),
        "events": await backend.events.read(KEY),
        "last": await backend.events.last(KEY),
        "values": [await backend.kv.get(k) for k in ("credential:tracker:alice", "link-once:abc", "gone")],
        "entries": [entry.value for entry in await backend.kv.entries("audit", 10)],
    }


@pytest.mark.parametrize(("source", "target"), PAIRS)
async def test_every_record_reads_back_the_same_from_the_copy_which_goes_on_from_there(
    source: str, target: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    source_url, target_url = store_url(source, request, tmp_path, "a"), store_url(target, request, tmp_path, "b")
    written = open_backend(source_url)
    try:
        ids = await fill(written)
        before = await seen(written, ids)
    finally:
        await written.close()
    assert before["values"] == [SEALED, b"once", None] and before["old"].messages == said("from", "before")
    totals: list[int] = []
    copied: list[int] = []
    counts = await copy_store(source_url, target_url, started=totals.append, copied=copied.append)
    kinds = {"questions": 2, "runs": 2, "conversations": 2, "event logs": 1, "key-value entries": 2, "lists": 1}
    assert counts == kinds
    assert totals == [10] and sum(copied) == 10

    copy = open_backend(target_url)
    try:
        assert await seen(copy, ids) == before
        # The copy goes on where the source stopped: the next event numbers after the last, the next message
        # after the conversation's, and the pending question takes its answer once.
        assert await copy.events.append(KEY, {"type": "text", "n": 9}) == before["last"] + 1
        conversation = before["conversation"]
        again = replace(conversation, messages=[*conversation.messages, *said("next")], active_run_id="run_3")
        added = await copy.conversations.send(again)
        assert added is not None and added.written.version == conversation.version + 1
        assert added.written.active_run_after == before["last"] + 1
        answer = Answer("accept", {"region": "eu"})
        assert await copy.elicitations.transition(ids["pending"], State.ACCEPTED, answer, utcnow())
        assert not await copy.elicitations.transition(ids["pending"], State.DECLINED, None, utcnow())
        assert await copy.runs.claim("run_2", "", "hub_b")
        assert (await copy.kv.holding("limits:runs:user:alice")).members == 0  # the limits' counts start over
    finally:
        await copy.close()


@pytest.mark.parametrize("target", ["sqlite", "redis", "postgres"])
async def test_a_store_that_is_not_empty_is_not_written(
    target: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    source_url, target_url = f"sqlite:///{tmp_path / 'a.db'}", store_url(target, request, tmp_path, "b")
    for url, value in ((source_url, b"new"), (target_url, b"kept")):
        backend = open_backend(url)
        await backend.kv.put("credential:tracker:alice", value)
        await backend.close()
    with pytest.raises(StoreUnusable, match=r"is not empty .*: copy only into an empty store"):
        await copy_store(source_url, target_url)
    backend = open_backend(target_url)
    try:
        assert await backend.kv.get("credential:tracker:alice") == b"kept"
    finally:
        await backend.close()


@pytest.mark.parametrize("source", ["redis", "postgres"])
async def test_a_source_a_hub_still_uses_is_not_copied(
    source: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    source_url = store_url(source, request, tmp_path, "a")
    backend = open_backend(source_url)
    try:
        await backend.runs.heartbeat("hub-a:8700", 60)
        with pytest.raises(StoreUnusable, match=r"hubs still use the store \(instances hub-a:8700\): stop every hub"):
            await copy_store(source_url, f"sqlite:///{tmp_path / 'b.db'}")
        await backend.runs.heartbeat("hub-a:8700", 0)  # it stopped: now the copy goes ahead
        assert await copy_store(source_url, f"sqlite:///{tmp_path / 'b.db'}") == {}
    finally:
        await backend.close()


async def test_a_postgres_target_where_a_hub_once_ran_is_empty_but_not_while_one_runs(
    postgres_url: str, tmp_path: Path
) -> None:
    source_url = f"sqlite:///{tmp_path / 'a.db'}"
    backend = open_backend(source_url)
    await backend.kv.put("credential:tracker:alice", SEALED)
    await backend.close()
    target = open_backend(postgres_url)
    try:
        await target.runs.heartbeat("hub-b:8700", 60)
        with pytest.raises(StoreUnusable, match=r"is not empty \(1 rows in elicithub_instances\)"):
            await copy_store(source_url, postgres_url)
        await target.runs.heartbeat("hub-b:8700", 0)  # it stopped: its last beat holds nothing
        assert await copy_store(source_url, postgres_url) == {"key-value entries": 1}
        assert await target.kv.get("credential:tracker:alice") == SEALED
    finally:
        await target.close()


async def test_a_redis_target_that_may_evict_keys_is_not_written(
    redis_server: RedisServer, redis_url: str, tmp_path: Path
) -> None:
    source_url = f"sqlite:///{tmp_path / 'a.db'}"
    backend = open_backend(source_url)
    await backend.kv.put("credential:tracker:alice", SEALED)
    await backend.close()
    with redis_server.client() as client:
        client.config_set("maxmemory-policy", "allkeys-lru")
        try:
            with pytest.raises(StoreUnusable, match=r"may evict keys \(maxmemory-policy is allkeys-lru\), losing what"):
                await copy_store(source_url, redis_url)
        finally:
            client.config_set("maxmemory-policy", "noeviction")
        assert client.dbsize() == 0


async def test_a_copy_that_stops_half_way_says_the_target_holds_part_of_it(postgres_url: str, tmp_path: Path) -> None:
    source_url = f"sqlite:///{tmp_path / 'a.db'}"
    backend = open_backend(source_url)
    for n in range(BATCH):
        await backend.kv.put(f"entry:{n:04}", b"v")
    await backend.kv.put("z\x00", b"a key Postgres text cannot hold")  # read last, in the second batch
    await backend.close()
    with pytest.raises(StoreUnusable, match=r"the copy stopped .*holds part of the records now: empty it before"):
        await copy_store(source_url, postgres_url)
    target = open_backend(postgres_url)
    try:
        assert await target.kv.get("entry:0000") == b"v"  # the first batch was written
    finally:
        await target.close()
