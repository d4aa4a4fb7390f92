"""What only the Postgres backend has: schema steps, its listener starting over, indexes, and its server settings."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import anyio
import asyncpg
import pytest

from elicithub.core.elicitation import State, utcnow
from elicithub.core.runs import ConversationRecord
from elicithub.errors import StoreUnusable
from elicithub.store import open_backend
from elicithub.store.postgres import PostgresBackend, conversations, elicitations, events, kv, runs
from elicithub.store.postgres.schema import LATEST, MIGRATIONS, migrate, version
from tests.core_fixtures import PostgresServer
from tests.store.test_stores import make

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
        # Records as hubs of that version wrote them: a conversation with its messages inline, an instance's beat.
        said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        data = {**ConversationRecord("c1", "chat-1", "alice", version=1).to_json(), "messages": said}
        await connection.execute(
            "INSERT INTO elicithub_conversations VALUES ('c1', 1, false, 1.0, $1)", json.dumps(data)
        )
        await connection.execute("INSERT INTO elicithub_instances VALUES ('hub_a', 1.0)")
        assert await migrate(connection) == [LATEST]
        assert await migrate(connection) == []  # applied once
        assert await connection.fetchval("SELECT count(*) FROM elicithub_instances") == 1
    finally:
        await connection.close()
    backend = open_backend(url)
    try:
        found = await backend.conversations.get("c1")
        assert found is not None and found.messages == said
    finally:
        await backend.close()


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
            with anyio.fail_after(5):
                assert await waiting == [(2, {"n": 2})]
        finally:
            await writer.close()
    finally:
        await reader.close()


async def test_an_answer_on_another_hub_wakes_the_waiter_within_milliseconds(postgres_url: str) -> None:
    here, there = open_backend(postgres_url), open_backend(postgres_url)
    try:
        notices = here.elicitations.resolutions()
        assert await anext(notices) is None
        latencies = []
        for _ in range(20):
            e = make()
            await there.elicitations.put(e)
            started = time.perf_counter()
            assert await there.elicitations.transition(e.id, State.DECLINED, None, utcnow())
            with anyio.fail_after(5):
                assert await anext(notices) == e.id
            latencies.append(time.perf_counter() - started)
        await notices.aclose()
        # The bound is p50 <= 5 ms on loopback; a busy test machine gets ten times that.
        assert sorted(latencies)[len(latencies) // 2] < 0.05
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
    for module in (elicitations, runs, conversations):
        monkeypatch.setattr(module, "PURGE_BATCH", 7)
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
