"""`/healthz` and `/readyz` as an orchestrator reads them: ready only while the store answers with the schema this
hub knows (and not while draining: tests/server/test_drain.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from elicithub.config import parse_config
from elicithub.server.app import create_app
from elicithub.store.postgres.schema import LATEST
from tests.conftest import ServedInThread, served
from tests.core_fixtures import PostgresServer, RedisServer


@contextmanager
def hub_on(store_url: str, tmp_path: Path) -> Iterator[ServedInThread]:
    config: dict[str, Any] = {"store": {"url": store_url}, "secrets": {"key_file": str(tmp_path / "secret.key")}}
    with served(create_app(parse_config(config))) as hub:
        yield hub


def test_a_hub_on_its_embedded_store_is_live_and_ready(tmp_path: Path) -> None:
    with hub_on(f"sqlite:///{tmp_path / 'hub.db'}", tmp_path) as hub:
        assert httpx.get(f"{hub.url}/healthz").json()["status"] == "ok"
        ready = httpx.get(f"{hub.url}/readyz")
        assert ready.status_code == 200 and ready.json() == {"ready": True}


def test_a_hub_whose_redis_stops_answering_is_not_ready_until_it_answers_again(tmp_path: Path) -> None:
    redis_server = RedisServer(tmp_path)
    try:
        with hub_on(redis_server.url(), tmp_path) as hub:
            assert httpx.get(f"{hub.url}/readyz").status_code == 200
            redis_server.stop()
            down = httpx.get(f"{hub.url}/readyz", timeout=30)
            assert down.status_code == 503
            assert down.json()["error"]["code"] == "not_ready"
            # Refused at once, or still retried by the client when the probe's time is up.
            assert down.json()["error"]["message"] in (
                "the Redis store does not answer: ConnectionError",
                "the store did not answer within 3 s",
            )
            assert httpx.get(f"{hub.url}/healthz").status_code == 200  # alive: restarting it would not help
            redis_server = RedisServer(tmp_path, port=redis_server.port)
            assert httpx.get(f"{hub.url}/readyz", timeout=30).status_code == 200
    finally:
        redis_server.stop()


def test_a_hub_behind_a_newer_postgres_schema_is_not_ready(postgres_server: PostgresServer, tmp_path: Path) -> None:
    url = postgres_server.fresh("probes")
    with hub_on(url, tmp_path) as hub:
        assert httpx.get(f"{hub.url}/readyz").status_code == 200
        postgres_server.psql("probes", f"INSERT INTO elicithub_migrations (version) VALUES ({LATEST + 1})")
        newer = httpx.get(f"{hub.url}/readyz")
        assert newer.status_code == 503
        message = newer.json()["error"]["message"]
        assert f"schema is at version {LATEST + 1}, this hub knows {LATEST}" in message
        assert "store migrate" in message
