"""What only the Postgres backend has: schema steps, its listener starting over, indexes, and its server settings."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import anyio
import asyncpg
import pytest

from elicithub.core.elicitation import Answer, State, utcnow
from elicithub.core.runs import ConversationRecord
from elicithub.errors import StoreUnusable
from elicithub.store import open_backend, steps
from elicithub.store.postgres import (
    PostgresBackend,
    PostgresElicitations,
    conversations,
    elicitations,
    events,
    kv,
    runs,
)
from elicithub.store.postgres.schema import LATEST, MIGRATIONS, migrate, version
from tests.core_fixtures import DEADLINE_S, PostgresServer
from tests.store.test_stores import NOW, make

pytestmark = pytest.mark.anyio

EXTRA_STEP = "ALTER TABLE elicithub_runs ADD COLUMN note text"
"""A step a later hub might add, to upgrade a database this hub made."""


def _tables_and_indexes(server: PostgresServer, database: str) -> str:
    return server.psql(
        database,
        "SELECT string_agg(tablename || ':' || indexdef, E'\\n' ORDER BY indexdef) FROM pg_indexes "
        "WHERE tablename LIKE 'elicithub%'",
    )


async def test_a_hub_creates_the_schema_in_an_empty_database(postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh("migrate_empty")
    backend = open_backend(url)
    try:
        await backend.open()
    finally:
        await backend.close()
    assert postgres_server.psql("migrate_empty", "SELECT max(version) FROM elicithub_migrations") == str(LATEST)
    index_names = _tables_and_indexes(postgres_server, "migrate_empty")
    for name in ("elicitations_due", "elicitations_resolved", "runs_unfinished", "runs_finished", "conversations_idle"):
        assert f"elicithub_{name}" in index_names


async def test_every_earlier_version_upgrades_to_the_schema_an_empty_database_gets(
    postgres_server: PostgresServer,
) -> None:
    postgres_server.fresh("migrate_target")
    target = await asyncpg.connect(postgres_server.url("migrate_target"))
    try:
        assert await migrate(target) == list(range(1, LATEST + 1))
    finally:
        await target.close()
    expected = _tables_and_indexes(postgres_server, "migrate_target")
    for start in range(LATEST):
        connection = await asyncpg.connect(postgres_server.fresh("migrate_from"))
        try:
            await migrate(connection, MIGRATIONS[:start])
            assert await migrate(connection) == list(range(start + 1, LATEST + 1))
            assert await version(connection) == LATEST
        finally:
            await connection.close()
        assert _tables_and_indexes(postgres_server, "migrate_from") == expected


async def test_a_database_of_the_previous_version_gets_only_the_new_step_and_keeps_its_records(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.fresh("migrate_previous")
    connection = await asyncpg.connect(url)
    try:
        assert await migrate(connection, MIGRATIONS[:-1]) == list(range(1, LATEST))
        # Records as hubs of earlier versions wrote them: a conversation with its messages inline, an instance's
        # beat, a pending question without waiters.
        said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        data = {**ConversationRecord("c1", "chat-1", "alice", version=1).to_json(), "messages": said}
        await connection.execute(
            "INSERT INTO elicithub_conversations VALUES ('c1', 1, false, 1.0, $1)", json.dumps(data)
        )
        await connection.execute("INSERT INTO elicithub_instances VALUES ('hub_a', 1.0)")
        e = make()
        await connection.execute(
            "INSERT INTO elicithub_elicitations (id, state, expires_at, data) VALUES ($1, 'pending', $2, $3)",
            e.id,
            e.expires_at.timestamp(),
            json.dumps(e.to_json()),
        )
        assert await migrate(connection) == [LATEST]
        assert await migrate(connection) == []  # applied once
        assert await connection.fetchval("SELECT count(*) FROM elicithub_instances") == 1
    finally:
        await connection.close()
    backend, other = open_backend(url), open_backend(url)
    try:
        found = await backend.conversations.get("c1")
        assert found is not None and found.messages == said
        async with contextlib.aclosing(backend.elicitations.resolutions()) as notices:
            with anyio.fail_after(DEADLINE_S):
                assert await anext(notices) is None
                assert await backend.elicitations.watch(e.id) == e  # the hub that resumes its run waits on it
                assert await other.elicitations.transition(e.id, State.DECLINED, Answer("decline"), NOW)
                assert await anext(notices) == e.id
    finally:
        await backend.close()
        await other.close()


async def test_a_hub_refuses_a_schema_newer_than_it_knows_and_says_so(postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh("migrate_newer")
    connection = await asyncpg.connect(url)
    try:
        await migrate(connection, (*MIGRATIONS, EXTRA_STEP))
    finally:
        await connection.close()
    backend = open_backend(url)
    try:
        with pytest.raises(StoreUnusable, match=f"schema is at version {LATEST + 1}, newer than this hub knows"):
            await backend.open()
        with pytest.raises(StoreUnusable):
            await backend.elicitations.get("eli_1")  # the first use checks the same way
    finally:
        await backend.close()


async def test_hubs_starting_together_apply_the_steps_once(postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh("migrate_together")
    backends = [open_backend(url) for _ in range(5)]
    try:
        await asyncio.gather(*(b.open() for b in backends))
    finally:
        await asyncio.gather(*(b.close() for b in backends))
    applied = postgres_server.psql(
        "migrate_together", "SELECT string_agg(version::text, ',') FROM elicithub_migrations"
    )
    assert applied == ",".join(str(n) for n in range(1, LATEST + 1))


async def test_an_unreachable_database_is_named_in_the_error() -> None:
    backend = open_backend("postgresql://nobody@127.0.0.1:1/none")
    try:
        with pytest.raises(StoreUnusable, match="cannot connect to the Postgres store"):
            await backend.open()
    finally:
        await backend.close()


async def test_a_reader_waiting_while_the_listener_is_down_catches_up_when_it_listens_again(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    reader = open_backend(postgres_url)
    try:
        # Connected and listening first (a wait that ends at once), so the waiting read below takes a moment only.
        assert await reader.events.wait("k", after=0, timeout_s=0) == []
        waiting = asyncio.create_task(reader.events.wait("k", after=0, timeout_s=30))
        await asyncio.sleep(0.2)
        # Saved by another hub while this one's notices are lost: the rows, with no NOTIFY.
        postgres_server.psql(
            "elicithub",
            "INSERT INTO elicithub_event_logs VALUES ('k', 1); "
            """INSERT INTO elicithub_events VALUES ('k', 1, '{"from": "elsewhere"}')""",
        )
        await asyncio.sleep(0.2)
        assert not waiting.done()
        assert postgres_server.kill_listeners() == 1
        with anyio.fail_after(10):
            assert await waiting == [(1, {"from": "elsewhere"})]
        # And it hears notices again.
        writer = open_backend(postgres_url)
        try:
            waiting = asyncio.create_task(reader.events.wait("k", after=1, timeout_s=30))
            await asyncio.sleep(0.2)
            await writer.events.append("k", {"n": 2})
            with anyio.fail_after(DEADLINE_S):
                assert await waiting == [(2, {"n": 2})]
        finally:
            await writer.close()
    finally:
        await reader.close()


@pytest.fixture
async def three(postgres_url: str) -> AsyncIterator[tuple[PostgresElicitations, ...]]:
    """Three clients of one database, each with its own pool and listening connection, as three hubs would have."""
    clients = tuple(PostgresElicitations(postgres_url) for _ in range(3))
    yield clients
    for client in clients:
        await client.close()


async def test_only_the_clients_that_wait_on_a_question_hear_its_end(three: tuple[PostgresElicitations, ...]) -> None:
    # a stores the questions (so waits on them), c waits on one it did not store, b only answers: b's listening
    # connection receives no notice of them. Notices come in the order their transactions committed, so a first
    # notice naming a question ended after them shows that none came before it (counted, not timed).
    a, b, c = three
    first, second, later = make(), make(), make()
    await a.put(first)
    await a.put(second)
    async with (
        contextlib.aclosing(a.resolutions()) as heard_by_a,
        contextlib.aclosing(b.resolutions()) as heard_by_b,
        contextlib.aclosing(c.resolutions()) as heard_by_c,
    ):
        with anyio.fail_after(DEADLINE_S):
            assert [await anext(heard_by_a), await anext(heard_by_b), await anext(heard_by_c)] == [None] * 3
            watched = await c.watch(first.id)
            assert watched is not None and watched.state is State.PENDING
            assert await b.transition(first.id, State.ACCEPTED, Answer("accept", {"region": "eu"}), NOW)
            assert await b.transition(second.id, State.DECLINED, Answer("decline"), NOW)
            assert [await anext(heard_by_a), await anext(heard_by_a)] == [first.id, second.id]
            assert await anext(heard_by_c) == first.id
            await b.put(later)  # now b waits on one
            assert await a.transition(later.id, State.EXPIRED, None, NOW)
            assert await anext(heard_by_b) == later.id  # its first notice since it listens
            ended = await c.watch(later.id)  # ended: c does not join its waiters
            assert ended is not None and ended.state is State.EXPIRED
            await c.put(third := make())
            assert await b.transition(third.id, State.EXPIRED, None, NOW)
            assert await anext(heard_by_c) == third.id  # nothing of `second` or `later` came before it


async def test_a_watch_racing_the_end_either_reads_the_end_or_hears_it(three: tuple[PostgresElicitations, ...]) -> None:
    # b ends each question while c watches it, both at once: a watch ordered before the end is among the waiters
    # the end notifies, one ordered after it reads the end. Then an end of c's own comes last, so what c heard
    # before it is all it hears of them.
    a, b, c = three
    questions = [make() for _ in range(20)]
    for e in questions:
        await a.put(e)
    async with contextlib.aclosing(c.resolutions()) as heard_by_c:
        with anyio.fail_after(10):
            assert await anext(heard_by_c) is None
            read_pending = set()
            for e in questions:
                watched, ended = await asyncio.gather(c.watch(e.id), b.transition(e.id, State.DECLINED, None, NOW))
                assert ended and watched is not None
                if watched.state is State.PENDING:
                    read_pending.add(e.id)
            await c.put(last := make())
            assert await b.transition(last.id, State.EXPIRED, None, NOW)
            heard = set()
            while (elicitation_id := await anext(heard_by_c)) != last.id:
                heard.add(elicitation_id)
    assert heard == read_pending


async def test_after_listening_again_a_client_hears_the_ends_of_its_questions(
    postgres_server: PostgresServer, three: tuple[PostgresElicitations, ...]
) -> None:
    a, b, _ = three
    async with contextlib.aclosing(a.resolutions()) as heard_by_a:
        with anyio.fail_after(10):
            assert await anext(heard_by_a) is None
            assert postgres_server.kill_listeners() == 1
            assert await anext(heard_by_a) is None  # listening again: re-read what you wait on
            await a.put(e := make())
            assert await b.transition(e.id, State.CANCELLED, Answer("cancel"), NOW)
            assert await anext(heard_by_a) == e.id


async def test_an_answer_on_another_hub_wakes_the_waiter_by_its_notice(postgres_url: str) -> None:
    # How fast the notice comes is measured in bench/, not here: a test does not time things.
    here, there = open_backend(postgres_url), open_backend(postgres_url)
    try:
        notices = here.elicitations.resolutions()
        assert await anext(notices) is None
        for _ in range(20):
            e = make()
            await here.elicitations.put(e)  # the hub that asks waits on it
            assert await there.elicitations.transition(e.id, State.DECLINED, None, utcnow())
            with anyio.fail_after(DEADLINE_S):
                assert await anext(notices) == e.id
        await notices.aclose()
    finally:
        await here.close()
        await there.close()


async def test_a_statement_running_past_the_configured_timeout_is_stopped(postgres_url: str) -> None:
    backend = open_backend(postgres_url, statement_timeout_s=0.2, pool_size=2)
    assert isinstance(backend, PostgresBackend)
    try:
        await backend.open()
        pool = await backend._db.pool()
        assert pool.get_max_size() == 2
        with pytest.raises(asyncpg.QueryCanceledError):
            await pool.execute("SELECT pg_sleep(2)")
    finally:
        await backend.close()


async def test_purges_go_in_batches_until_nothing_old_is_left(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(steps, "PURGE_BATCH", 7)
    backend = open_backend(postgres_url)
    try:
        await backend.open()
        pool = await backend._db.pool()  # type: ignore[attr-defined]
        await pool.execute(
            "INSERT INTO elicithub_runs SELECT 'run_' || n, 'finished', 'hub', 10, '{}' FROM generate_series(1, 30) n"
        )
        await pool.execute(
            "INSERT INTO elicithub_conversations SELECT 'c' || n, 1, false, 10, '{}' FROM generate_series(1, 30) n"
        )
        await pool.execute(
            "INSERT INTO elicithub_elicitations SELECT 'eli_' || n, 'declined', 10, 10, '{}' "
            "FROM generate_series(1, 30) n"
        )
        await pool.execute("INSERT INTO elicithub_events SELECT 'c' || n, 1, '{}' FROM generate_series(1, 30) n")
        assert await backend.runs.purge(20) == 30
        assert await backend.conversations.purge(20) == 30
        assert await backend.elicitations.purge(utcnow() - timedelta(days=1)) == 30
        assert await pool.fetchval("SELECT count(*) FROM elicithub_events") == 0
    finally:
        await backend.close()


HOT_PATH = [
    (elicitations.GET, ("eli_1",)),
    (elicitations.GET_PENDING, ("eli_1",)),
    (elicitations.WATCH, ("eli_1", "elicithub_resolved_0")),
    (elicitations.TRANSITION, ("eli_1", "declined", 1.0, "{}")),
    (elicitations.DUE, (1.0, 500)),
    (elicitations.PURGE, (1.0, 2000)),
    (runs.GET, ("run_1",)),
    (runs.CLAIM, ("run_1", "a", "b")),
    (runs.UNFINISHED, ("hub", 1000)),
    (runs.PURGE, (1.0, 2000)),
    (runs.ALIVE, ("hub",)),
    (conversations.GET, ("c1",)),
    (conversations.GET_WITH_MESSAGES, ("c1",)),
    (conversations.HISTORY, ("c1", 10)),
    (conversations.UPDATE, ("c1", 2, False, 1.0, "{}", 1)),
    (conversations.UPDATE_WITH_MESSAGES, ("c1", 2, False, 1.0, "{}", 1, 20, ["{}"])),
    (conversations.PURGE, (1.0, 2000)),
    (events.APPEND, ("c1", "{}")),
    (events.READ, ("c1", 0, 1000)),
    (events.TRIM, ("c1", 10)),
    (events.LAST, ("c1",)),
    (kv.GET, ("k", 1.0)),
    (kv.TAKE, ("k", 1.0)),
    (kv.PURGE, (1.0, 2000)),
    (kv.ADD_ENTRY, ("mcp-tasks:u1", 1, 2, "task_1")),
    (kv.ENTRIES, ("mcp-tasks:u1", 1, 51)),
    (kv.ENTRIES_BEFORE, ("mcp-tasks:u1", 1, 51, 3000, "task_3000")),
    (kv.PURGE_ENTRIES, (1, 2000)),
]


def unserved_scans(plan: dict[str, Any], partial: set[str]) -> list[str]:
    """The scans in a plan that read a whole table or a whole index of all its rows: a sequential scan, or an index
    scan with no condition on the index unless the index is partial (it holds only the rows asked for)."""
    found = []
    kind = plan["Node Type"]
    if kind == "Seq Scan":
        found.append(f"Seq Scan on {plan['Relation Name']}")
    elif kind in ("Index Scan", "Index Only Scan", "Bitmap Index Scan"):
        if "Index Cond" not in plan and plan["Index Name"] not in partial:
            found.append(f"{kind} of all of {plan['Index Name']}")
    for child in plan.get("Plans", []):
        found += unserved_scans(child, partial)
    return found


async def test_every_hot_path_query_is_served_by_an_index(postgres_url: str) -> None:
    # With sequential scans disabled the planner still falls back to one when no index can serve a query; it may also
    # read a whole index instead, which `unserved_scans` catches too. The tables hold rows of a busy hub's shape.
    backend = open_backend(postgres_url)
    try:
        await backend.open()
        pool = await backend._db.pool()  # type: ignore[attr-defined]
        async with pool.acquire() as connection:
            await connection.execute(
                "INSERT INTO elicithub_elicitations SELECT 'eli_' || n, CASE WHEN n % 50 = 0 THEN 'pending' "
                "ELSE 'accepted' END, n, CASE WHEN n % 50 = 0 THEN NULL ELSE n END, '{}' "
                "FROM generate_series(1, 5000) n"
            )
            await connection.execute(
                "INSERT INTO elicithub_runs SELECT 'run_' || n, CASE WHEN n % 50 = 0 THEN 'paused' "
                "ELSE 'finished' END, 'hub_' || (n % 3), n, '{}' FROM generate_series(1, 5000) n"
            )
            await connection.execute(
                "INSERT INTO elicithub_conversations SELECT 'c' || n, 1, n % 10 = 0, n, '{}' "
                "FROM generate_series(1, 5000) n"
            )
            await connection.execute(
                "INSERT INTO elicithub_conversation_messages SELECT 'c' || (n / 20), n % 20, '{}' "
                "FROM generate_series(20, 10019) n"
            )
            await connection.execute(
                "INSERT INTO elicithub_event_logs SELECT 'c' || n, 20 FROM generate_series(1, 500) n"
            )
            await connection.execute(
                "INSERT INTO elicithub_events SELECT 'c' || (n / 20), n % 20 + 1, '{}' "
                "FROM generate_series(20, 10019) n"
            )
            await connection.execute(
                "INSERT INTO elicithub_kv SELECT 'k' || n, '\\x00', CASE WHEN n % 2 = 0 THEN n END "
                "FROM generate_series(1, 5000) n"
            )
            await connection.execute(
                "INSERT INTO elicithub_kv_entries SELECT 'mcp-tasks:u' || (n % 100), n, 'task_' || n "
                "FROM generate_series(1, 5000) n"
            )
            await connection.execute("ANALYZE")
            await connection.execute("SET enable_seqscan = off")
            partial = {
                row[0]
                for row in await connection.fetch("SELECT indexname FROM pg_indexes WHERE indexdef LIKE '% WHERE %'")
            }
            for sql, args in HOT_PATH:  # EXPLAIN without ANALYZE runs nothing, so nothing is written
                [plan] = json.loads(await connection.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args))
                assert unserved_scans(plan["Plan"], partial) == [], sql
    finally:
        await backend.close()


async def test_expired_list_entries_are_purged_in_batches_from_every_list(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kv, "PURGE_EVERY", 2)
    monkeypatch.setattr(kv, "PURGE_BATCH", 7)
    backend = open_backend(postgres_url)
    try:
        await backend.open()
        pool = await backend._db.pool()  # type: ignore[attr-defined]
        await pool.execute(
            "INSERT INTO elicithub_kv_entries SELECT 'mcp-tasks:u' || n, 1, 'task_' || n FROM generate_series(1, 20) n"
        )
        await backend.kv.add_entry("mcp-tasks:alice", "task_1", 60)
        assert await pool.fetchval("SELECT count(*) FROM elicithub_kv_entries") == 21  # not yet
        await backend.kv.add_entry("mcp-tasks:alice", "task_2", 60)
        assert await pool.fetchval("SELECT count(*) FROM elicithub_kv_entries") == 22 - 7
        for n in range(3, 9):
            await backend.kv.add_entry("mcp-tasks:alice", f"task_{n}", 60)
        assert await pool.fetchval("SELECT count(*) FROM elicithub_kv_entries WHERE expires_ms <= 1") == 0
    finally:
        await backend.close()
