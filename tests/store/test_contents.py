"""Each backend's `contents` knows every table, column and key kind its store has, so a copy leaves nothing behind
unseen: a table or key added to a store without being taught to the copy fails here, and one found in a store at
copy time stops the copy."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import asyncpg
import pytest
import redis

from elicithub.errors import StoreUnusable
from elicithub.store import open_backend
from elicithub.store.copy import copy_store
from elicithub.store.postgres import contents as postgres_contents
from elicithub.store.postgres.schema import MIGRATIONS, migrate
from elicithub.store.redis import contents as redis_contents
from elicithub.store.sqlite import contents as sqlite_contents
from tests.core_fixtures import PostgresServer

pytestmark = pytest.mark.anyio

REDIS_SOURCES = Path(redis_contents.__file__).parent


def sqlite_schema(path: Path) -> dict[str, tuple[str, ...]]:
    with sqlite3.connect(path) as db:
        names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: tuple(c[1] for c in db.execute(f'PRAGMA table_info("{name}")')) for name in names}


async def test_the_copy_knows_every_table_and_column_of_the_sqlite_file(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path / 'hub.db'}")
    await backend.close()
    assert sqlite_schema(tmp_path / "hub.db") == sqlite_contents.TABLES


async def migrated(postgres_server: PostgresServer, database: str) -> str:
    """A new database with every schema step applied."""
    url = postgres_server.fresh(database)
    backend = open_backend(url)
    await backend.open()
    await backend.close()
    return url


async def test_the_copy_knows_every_table_and_column_of_the_postgres_schema(postgres_server: PostgresServer) -> None:
    url = await migrated(postgres_server, "contents")
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "ORDER BY table_name, ordinal_position"
        )
    finally:
        await connection.close()
    found: dict[str, tuple[str, ...]] = {}
    for row in rows:
        found[row["table_name"]] = (*found.get(row["table_name"], ()), row["column_name"])
    assert found == postgres_contents.TABLES


def test_the_copy_knows_every_kind_of_key_the_redis_backend_writes() -> None:
    # Every key the backend makes is PREFIX then its kind: `f"{PREFIX}run:{id}"`, `f"{PREFIX}pending"`. Pub/sub
    # channels put the database first (`f"{PREFIX}{db}:casts"`), and are no keys.
    written = {
        kind
        for source in REDIS_SOURCES.glob("*.py")
        if source.name != "contents.py"
        for kind in re.findall(r"\{PREFIX\}([a-z][a-z-]*)", source.read_text())
    }
    assert "run-owner" in written and "appended" in written  # the pattern finds them
    assert written == set(redis_contents.KINDS)


async def test_a_sqlite_table_the_copy_does_not_know_stops_it(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path / 'a.db'}")
    await backend.kv.put("credential:tracker:alice", b"sealed")
    await backend.close()
    with sqlite3.connect(tmp_path / "a.db") as db:
        db.execute("CREATE TABLE outbox (id TEXT PRIMARY KEY, data TEXT)")
        db.execute("ALTER TABLE runs ADD COLUMN priority INTEGER")
    with pytest.raises(StoreUnusable, match=r"holds outbox, runs\.priority, which this elicithub does not know"):
        await copy_store(f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}")
    assert not (tmp_path / "b.db").exists()


async def test_a_postgres_table_the_copy_does_not_know_stops_it(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = await migrated(postgres_server, "contents_strange")
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("CREATE TABLE elicithub_outbox (id text PRIMARY KEY)")
        await connection.execute("ALTER TABLE elicithub_kv ADD COLUMN owner text")
        await connection.execute("CREATE TABLE orders (id text PRIMARY KEY)")  # another application's: not the hub's
    finally:
        await connection.close()
    with pytest.raises(StoreUnusable, match=r"holds elicithub_kv\.owner, elicithub_outbox, which this elicithub"):
        await copy_store(url, f"sqlite:///{tmp_path / 'b.db'}")


async def test_a_redis_key_the_copy_does_not_know_stops_it(redis_url: str, tmp_path: Path) -> None:
    with redis.Redis.from_url(redis_url) as client:
        client.set("elicithub:outbox:1", "{}")
        client.set("elicithub:vault:credential:tracker:alice", "c2VhbGVk")
        client.set("orders:1", "another application's")
    with pytest.raises(StoreUnusable, match=r"holds elicithub:outbox:\*, which this elicithub does not know"):
        await copy_store(redis_url, f"sqlite:///{tmp_path / 'b.db'}")


async def test_a_postgres_source_of_an_earlier_schema_is_brought_up_first(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.fresh("contents_old")
    connection = await asyncpg.connect(url)
    try:
        await migrate(connection, MIGRATIONS[:3])
    finally:
        await connection.close()
    with pytest.raises(StoreUnusable, match=r"schema is at version 3, this elicithub's at \d+: .*store migrate"):
        await copy_store(url, f"sqlite:///{tmp_path / 'b.db'}")
