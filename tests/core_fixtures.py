"""Fixtures and values shared by the core and store tests: the anyio backend, the four stores (with a real
redis-server and a real PostgreSQL cluster), one form schema, and the one way tests make an elicitation."""

from __future__ import annotations

import asyncio
import glob
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis

from elicithub.core.bus import EventBus
from elicithub.core.elicitation import Elicitation, new_elicitation
from elicithub.core.events import StreamEvent
from elicithub.core.ports import Backend
from elicithub.core.ports import ElicitationStore as Store
from elicithub.store import (
    MemoryElicitations,
    SqliteElicitations,
    open_backend,
)
from elicithub.store.postgres.elicitations import PostgresElicitations
from elicithub.store.redis.elicitations import RedisElicitations
from tests.conftest import free_port, wait_for_port

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "enum": ["eu", "us"]},
        "replicas": {"type": "integer", "minimum": 1},
    },
    "required": ["region"],
}

DEADLINE_S = 60
"""How long a test waits for what it expects before it fails: only a test that would hang reaches it (a busy
machine can take seconds for what takes milliseconds alone)."""


def _http_waits_until_the_deadline() -> None:
    """httpx gives up on a response after 5 s unless told otherwise, and a machine busy enough can take that long to
    answer a test's request. In tests an HTTP call made without a timeout of its own waits up to `DEADLINE_S`, a
    bound that only ends a hang. The hub's own clients all set theirs, so they are as in production."""
    deadline = httpx.Timeout(DEADLINE_S)
    functions = (httpx.Client.__init__, httpx.AsyncClient.__init__, httpx.request, httpx.stream)
    for function in (
        *functions,
        *(getattr(httpx, m) for m in ("get", "options", "head", "post", "put", "patch", "delete")),
    ):
        function = getattr(function, "__wrapped__", function)  # httpx.stream is a context manager's wrapper
        if function.__kwdefaults__ and "timeout" in function.__kwdefaults__:
            function.__kwdefaults__["timeout"] = deadline
        elif function.__defaults__:
            function.__defaults__ = tuple(
                deadline if isinstance(value, httpx.Timeout) else value for value in function.__defaults__
            )


_http_waits_until_the_deadline()


_runs = itertools.count(1)


def question(timeout_s: float = 60, *, at: datetime | None = None, **fields: Any) -> Elicitation:
    """A question as the hub makes one (`new_elicitation`), open for `timeout_s`: a form ("Which region?", SCHEMA)
    from an MCP tool to alice in conv_1, in a run of its own. `fields` are new_elicitation's; a `url` makes it a
    sign-in (url mode, no schema). `at` fixes when it was made, for tests with a clock of their own."""
    sign_in = fields.get("url") is not None
    made = new_elicitation(
        timeout_s=timeout_s,
        **{
            "conversation_id": "conv_1",
            "user_id": "alice",
            "run_id": f"run_{next(_runs)}",
            "mode": "url" if sign_in else "form",
            "message": "Which region?",
            "requested_schema": None if sign_in else SCHEMA,
            "context": {"trigger": "mcp_elicitation", "serverId": "deploy", "toolName": "provision"},
            **fields,
        },
    )
    return made if at is None else replace(made, created_at=at, expires_at=at + timedelta(seconds=timeout_s))


class RedisServer:
    """A real redis-server on a free port of 127.0.0.1, started for the test session."""

    def __init__(self, workdir: Path, *persistence: str, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed; the Redis tests need it (apt install redis-server)")
        self.port = port or free_port()
        settings = persistence or ("--save", "", "--appendonly", "no")
        command = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(workdir), *settings]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        wait_for_port(self.port)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.url(db), decode_responses=True)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """Database 0 of the session's redis-server, emptied for this test."""
    with redis_server.client() as client:
        client.flushdb()
    return redis_server.url()


class PostgresServer:
    """A throwaway PostgreSQL cluster in a temporary directory, on a free port of 127.0.0.1, for the test session.

    PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user (Debian's package
    makes it). Durability is off (fsync, synchronous commit): nothing here outlives the session.
    """

    SUPERUSER = "postgres"

    def __init__(self) -> None:
        self.bindir = bindir = _postgres_bindir()
        self.as_user = "postgres" if os.geteuid() == 0 else None
        self.workdir = Path(tempfile.mkdtemp(prefix="elicithub-pg-"))
        if self.as_user is not None:
            shutil.chown(self.workdir, self.as_user)
        data = self.workdir / "data"
        initdb = [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", self.SUPERUSER, "--no-sync"]
        subprocess.run([*initdb, "-E", "UTF8"], check=True, stdout=subprocess.DEVNULL, user=self.as_user)
        self.port = free_port()
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.workdir),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "400",
        }
        command = [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port)]
        command += [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        self.process = subprocess.Popen(command, **quiet, user=self.as_user)
        wait_for_port(self.port)
        self.psql("postgres", "SELECT 1")  # accepting connections, not only listening

    def url(self, database: str = "elicithub") -> str:
        return f"postgresql://{self.SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def psql(self, database: str, sql: str) -> str:
        options = ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
        command = [str(self.bindir / "psql"), *options, self.url(database), "-c", sql]
        for _ in range(100):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode == 0:
                return done.stdout.strip()
            if "starting up" not in done.stderr:
                raise RuntimeError(f"psql failed: {done.stderr}")
        raise RuntimeError("PostgreSQL did not finish starting")

    def fresh(self, database: str) -> str:
        """An empty database of this name (dropped first if there was one, with any connections to it)."""
        self.psql("postgres", f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        self.psql("postgres", f'CREATE DATABASE "{database}"')
        return self.url(database)

    def emptied(self, database: str = "elicithub") -> str:
        """This database with the hub's schema kept but every record gone (quicker than a fresh database)."""
        if not self.psql("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{database}'"):
            return self.fresh(database)
        self.psql(database, _TRUNCATE_HUB_TABLES)
        return self.url(database)

    def kill_listeners(self, database: str = "elicithub") -> int:
        """End the hubs' listening connections to this database, as a network failure would; how many."""
        killed = self.psql(
            "postgres",
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            f"WHERE application_name = 'elicithub listener' AND datname = '{database}'",
        )
        return int(killed)

    def stop(self) -> None:
        # SIGINT is PostgreSQL's fast shutdown: it ends the sessions still open (SIGTERM would wait for them).
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=20)
        shutil.rmtree(self.workdir, ignore_errors=True)


_TRUNCATE_HUB_TABLES = """
DO $$ DECLARE tables text; BEGIN
    SELECT string_agg(quote_ident(tablename), ', ') INTO tables FROM pg_tables
    WHERE schemaname = 'public' AND tablename LIKE 'elicithub\\_%' AND tablename <> 'elicithub_migrations';
    IF tables IS NOT NULL THEN EXECUTE 'TRUNCATE ' || tables; END IF;
END $$
"""


def _postgres_bindir() -> Path:
    """Where initdb and postgres are: Debian keeps them out of PATH, under /usr/lib/postgresql/VERSION/bin."""
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    found = debian[-1] if debian else shutil.which("initdb")
    if found is None:
        raise RuntimeError("PostgreSQL is not installed; the Postgres tests need it (apt install postgresql)")
    return Path(found).parent


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The session cluster's `elicithub` database, every record of the hub gone for this test."""
    return postgres_server.emptied()


@pytest.fixture(params=["redis", "postgres"])
def shared_url(request: pytest.FixtureRequest) -> str:
    """The URL of each store several hubs may share, emptied for this test."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store
    if request.param == "memory":
        opened = MemoryElicitations()
    elif request.param == "sqlite":
        opened = SqliteElicitations(tmp_path / "hub.db")
    elif request.param == "redis":
        opened = RedisElicitations(request.getfixturevalue("redis_url"))
    else:
        opened = PostgresElicitations(request.getfixturevalue("postgres_url"))
    yield opened
    await opened.close()


class BusSink:
    """The broker's event sink, in memory: each run's events on an EventBus keyed by run id, for tests to read."""

    def __init__(self) -> None:
        self.bus: EventBus[StreamEvent] = EventBus()

    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
        self.bus.publish(elicitation.run_id, event)


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each backend, as `open_backend` makes it (Redis: database 0 of the session's redis-server, emptied;
    Postgres: the session cluster's `elicithub` database, emptied)."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'hub.db'}"
    elif request.param == "redis":
        url = request.getfixturevalue("redis_url")
    else:
        url = request.getfixturevalue("postgres_url")
    opened = open_backend(url, events_max_len=100)
    yield opened
    await opened.close()


async def until(condition: Callable[[], bool], timeout_s: float = DEADLINE_S) -> None:
    """Until `condition` holds: for state another task reaches through I/O, which offers no event to wait on. The
    deadline only ends a test that would hang; nothing here depends on how fast the machine is."""
    with anyio.fail_after(timeout_s):
        while not condition():  # noqa: ASYNC110 - the condition is read from the broker, which has no event for it
            await asyncio.sleep(0.001)
