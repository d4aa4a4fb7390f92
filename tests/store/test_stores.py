"""Memory, SQLite, Redis and Postgres elicitations: one Store contract, SQLite persistence, open_backend()."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import anyio
import pytest

from elicithub.core.approval import Approval, People
from elicithub.core.elicitation import Answer, State
from elicithub.core.ports import ElicitationStore as Store
from elicithub.errors import StoreUnsupported
from elicithub.store import (
    MemoryElicitations,
    SqliteElicitations,
    open_backend,
)
from elicithub.store.postgres.elicitations import PostgresElicitations
from elicithub.store.redis.elicitations import RedisElicitations
from tests.core_fixtures import DEADLINE_S, question

NOW = datetime.now(UTC).replace(microsecond=0)
"""The real clock at import, not a fixed date: Redis gives an elicitation a safety-net expiry from its deadline, and one
long past lived a second, so a slow machine lost some before the test resolved them."""

# This module's questions (and those of the other store tests), made at NOW and open ten minutes.
make = partial(question, timeout_s=600, at=NOW)


@pytest.mark.anyio
async def test_put_then_get_returns_an_equal_elicitation(store: Store) -> None:
    e = make()
    await store.put(e)
    assert await store.get(e.id) == e
    url = make(url="http://127.0.0.1:8700/auth/connect?t=1")
    await store.put(url)
    assert await store.get(url.id) == url


@pytest.mark.anyio
async def test_get_unknown_id_is_none(store: Store) -> None:
    assert await store.get("eli_missing") is None


@pytest.mark.anyio
async def test_transition_is_compare_and_set(store: Store) -> None:
    e = make()
    await store.put(e)
    at = NOW + timedelta(seconds=5)
    assert await store.transition(e.id, State.ACCEPTED, Answer("accept", {"region": "eu"}), at) is True
    assert await store.transition(e.id, State.DECLINED, Answer("decline"), at) is False
    assert await store.transition(e.id, State.ACCEPTED, Answer("accept", {"region": "us"}), at) is False
    stored = await store.get(e.id)
    assert stored is not None
    assert stored.state is State.ACCEPTED
    assert stored.answer == Answer("accept", {"region": "eu"})
    assert stored.resolved_at == at
    # Everything else is untouched.
    assert stored.message == e.message and stored.expires_at == e.expires_at and stored.context == e.context


@pytest.mark.anyio
async def test_an_approvals_decline_keeps_its_reason_as_stored(store: Store) -> None:
    e = make(approval=Approval(People(("bob",))))
    await store.put(e)
    declined = Answer("decline", {"reason": "not during the freeze"}, by="bob")
    assert await store.transition(e.id, State.DECLINED, declined, NOW) is True
    stored = await store.get(e.id)
    assert stored is not None and stored.state is State.DECLINED and stored.answer == declined


@pytest.mark.anyio
async def test_transition_of_unknown_id_is_false(store: Store) -> None:
    assert await store.transition("eli_missing", State.CANCELLED, Answer("cancel"), NOW) is False
    assert await store.get("eli_missing") is None


@pytest.mark.anyio
async def test_concurrent_transitions_let_exactly_one_win(store: Store) -> None:
    e = make()
    await store.put(e)
    states = [State.ACCEPTED, State.DECLINED, State.CANCELLED, State.EXPIRED] * 10
    results = await asyncio.gather(*(store.transition(e.id, s, None, NOW) for s in states))
    assert results.count(True) == 1
    stored = await store.get(e.id)
    assert stored is not None and stored.state is states[results.index(True)]


@pytest.mark.anyio
async def test_due_returns_only_pending_past_their_deadline(store: Store) -> None:
    due = make(timeout_s=-1)
    exactly_now = make(timeout_s=0)
    future = make(timeout_s=1)
    answered = make(timeout_s=-1)
    expired = make(timeout_s=-1)
    for e in (due, exactly_now, future, answered, expired):
        await store.put(e)
    assert await store.transition(answered.id, State.DECLINED, Answer("decline"), NOW)
    assert await store.transition(expired.id, State.EXPIRED, None, NOW)

    found = await store.due(NOW)
    assert {e.id for e in found} == {due.id, exactly_now.id}
    assert all(e.state is State.PENDING for e in found)
    assert await store.due(NOW - timedelta(hours=1)) == []


@pytest.mark.anyio
async def test_due_respects_the_limit(store: Store) -> None:
    for _ in range(5):
        await store.put(make(timeout_s=-1))
    assert len(await store.due(NOW, limit=3)) == 3
    assert len(await store.due(NOW)) == 5


@pytest.mark.anyio
async def test_purge_forgets_terminal_elicitations_resolved_before_the_cutoff(store: Store) -> None:
    old, recent, pending = make(), make(), make()
    for e in (old, recent, pending):
        await store.put(e)
    assert await store.transition(old.id, State.ACCEPTED, Answer("accept", {}), NOW - timedelta(hours=2))
    assert await store.transition(recent.id, State.EXPIRED, None, NOW)

    assert await store.purge(NOW - timedelta(hours=1)) == 1
    assert await store.get(old.id) is None
    assert await store.get(recent.id) is not None
    assert await store.get(pending.id) is not None
    assert await store.purge(NOW - timedelta(hours=1)) == 0


@pytest.mark.anyio
async def test_resolutions_start_with_none_then_name_each_elicitation_that_won_a_transition(store: Store) -> None:
    first, second = make(), make()
    for e in (first, second):
        await store.put(e)
    async with contextlib.aclosing(store.resolutions()) as notices:
        with anyio.fail_after(DEADLINE_S):
            assert await anext(notices) is None  # listening from here on
            assert await store.transition(first.id, State.DECLINED, Answer("decline"), NOW)
            assert await store.transition(first.id, State.CANCELLED, Answer("cancel"), NOW) is False
            assert await store.transition("eli_missing", State.CANCELLED, Answer("cancel"), NOW) is False
            assert await store.transition(second.id, State.EXPIRED, None, NOW)
            # The losing transitions said nothing: the next notice after the first is the second elicitation.
            assert [await anext(notices), await anext(notices)] == [first.id, second.id]


@pytest.mark.anyio
async def test_a_watch_reads_the_question_and_its_end_is_heard(store: Store) -> None:
    e = make()
    await store.put(e)
    async with contextlib.aclosing(store.resolutions()) as notices:
        with anyio.fail_after(DEADLINE_S):
            assert await anext(notices) is None
            assert await store.watch(e.id) == e
            assert await store.watch("eli_missing") is None
            assert await store.transition(e.id, State.DECLINED, Answer("decline"), NOW)
            assert await anext(notices) == e.id
    ended = await store.watch(e.id)
    assert ended is not None and ended.state is State.DECLINED and ended.answer == Answer("decline")


@pytest.mark.anyio
async def test_a_transition_against_the_question_as_held_is_still_compare_and_set(store: Store) -> None:
    e = make()
    await store.put(e)
    assert await store.transition(e.id, State.ACCEPTED, Answer("accept", {"region": "eu"}), NOW, e)
    assert await store.transition(e.id, State.DECLINED, Answer("decline"), NOW, e) is False  # held copy stale now
    stored = await store.get(e.id)
    assert stored is not None and stored.state is State.ACCEPTED and stored.answer == Answer("accept", {"region": "eu"})


@pytest.mark.anyio
async def test_sqlite_store_survives_reopening_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "hub.db"
    resolved, pending = make(), make(timeout_s=-1)
    first = SqliteElicitations(path)
    await first.put(resolved)
    await first.put(pending)
    assert await first.transition(resolved.id, State.ACCEPTED, Answer("accept", {"region": "eu"}), NOW)
    await first.close()
    assert path.exists()

    second = SqliteElicitations(path)
    try:
        back = await second.get(resolved.id)
        assert back is not None
        assert back.state is State.ACCEPTED
        assert back.answer == Answer("accept", {"region": "eu"})
        assert back.resolved_at == NOW
        assert await second.get(pending.id) == pending
        assert [e.id for e in await second.due(NOW)] == [pending.id]
        # The compare-and-set still holds after reopening.
        assert await second.transition(resolved.id, State.DECLINED, Answer("decline"), NOW) is False
    finally:
        await second.close()


@pytest.mark.anyio
async def test_two_sqlite_stores_on_one_file_share_state_and_compare_and_set(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    a, b = SqliteElicitations(path), SqliteElicitations(path)
    try:
        e = make()
        await a.put(e)
        assert await b.get(e.id) == e
        results = await asyncio.gather(
            *(store.transition(e.id, State.CANCELLED, Answer("cancel"), NOW) for store in [a, b] * 10)
        )
        assert results.count(True) == 1
        stored = await a.get(e.id)
        assert stored is not None and stored.state is State.CANCELLED
    finally:
        await a.close()
        await b.close()


@pytest.mark.anyio
async def test_memory_store_close_forgets_everything() -> None:
    store = MemoryElicitations()
    e = make()
    await store.put(e)
    await store.close()
    assert await store.get(e.id) is None


def test_open_backend_memory_url() -> None:
    backend = open_backend("memory://")
    assert isinstance(backend.elicitations, MemoryElicitations) and not backend.durable and not backend.shared


@pytest.mark.anyio
async def test_open_backend_sqlite_url_with_absolute_path(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "hub.db"
    backend = open_backend(f"sqlite:///{path}")
    try:
        assert isinstance(backend.elicitations, SqliteElicitations) and backend.durable
        assert path.exists()
        e = make()
        await backend.elicitations.put(e)
        assert await backend.elicitations.get(e.id) == e
    finally:
        await backend.close()


@pytest.mark.anyio
async def test_open_backend_sqlite_url_with_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    backend = open_backend("sqlite:///.elicithub/hub.db")
    try:
        assert (tmp_path / ".elicithub" / "hub.db").exists()
    finally:
        await backend.close()


@pytest.mark.anyio
async def test_open_backend_redis_url(redis_url: str) -> None:
    backend = open_backend(redis_url)
    try:
        assert isinstance(backend.elicitations, RedisElicitations) and backend.shared
        e = make()
        await backend.elicitations.put(e)
        assert await backend.elicitations.get(e.id) == e
    finally:
        await backend.close()


@pytest.mark.anyio
async def test_open_backend_postgres_url(postgres_url: str) -> None:
    backend = open_backend(postgres_url.replace("postgresql://", "postgres://"))
    try:
        assert isinstance(backend.elicitations, PostgresElicitations) and backend.shared and backend.durable
        e = make()
        await backend.elicitations.put(e)
        assert await backend.elicitations.get(e.id) == e
    finally:
        await backend.close()


@pytest.mark.parametrize(
    "url", ["redis:/localhost:6379/0", "sqlite://hub.db", "memory:", "", "postgres:/x/y", "mysql://x/y"]
)
def test_open_backend_rejects_unsupported_urls_never_falling_back_to_memory(url: str) -> None:
    with pytest.raises(StoreUnsupported, match="unsupported store url"):
        open_backend(url)
