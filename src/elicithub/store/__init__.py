"""Where everything the hub keeps lives: one backend per store URL, each holding every record kind."""

from __future__ import annotations

from pathlib import Path

from elicithub.config import Config
from elicithub.core.ports import Backend
from elicithub.errors import StoreUnsupported
from elicithub.store.memory import MemoryBackend
from elicithub.store.memory.elicitations import MemoryElicitations
from elicithub.store.sqlite import SqliteBackend
from elicithub.store.sqlite.elicitations import SqliteElicitations

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_backend(
    url: str,
    *,
    events_max_len: int = 1000,
    retention_s: float = 7 * 24 * 3600,
    pool_size: int = 10,
    statement_timeout_s: float = 30,
    allow_eviction: bool = False,
) -> Backend:
    """The backend a config `store.url` names: memory://, sqlite:///PATH, redis://HOST:PORT/DB or
    postgresql://USER:PASS@HOST/DB. `pool_size` and `statement_timeout_s` apply to Postgres, `allow_eviction` to
    Redis."""
    if url == "memory://":
        return MemoryBackend(events_max_len)
    if url.startswith("sqlite:///"):
        return SqliteBackend(Path(url.removeprefix("sqlite:///")), events_max_len)
    if url.startswith("redis://"):
        from elicithub.store.redis import RedisBackend  # slow to import (redis): only a hub that uses it does

        return RedisBackend(url, events_max_len, retention_s, allow_eviction)
    if url.startswith(POSTGRES_SCHEMES):
        from elicithub.store.postgres import PostgresBackend  # slow to import (asyncpg): only a hub that uses it does

        return PostgresBackend(url, events_max_len, pool_size, statement_timeout_s)
    raise StoreUnsupported(
        f"unsupported store url {url!r}; use memory://, sqlite:///PATH, redis://HOST:PORT/DB or "
        "postgresql://USER:PASS@HOST/DB"
    )


def configured_backend(config: Config) -> Backend:
    """The backend of a hub's config, with its store and conversation settings."""
    return open_backend(
        config.store.url,
        events_max_len=config.conversations.max_events,
        retention_s=config.conversations.retention_s,
        pool_size=config.store.pool_size,
        statement_timeout_s=config.store.statement_timeout_s,
        allow_eviction=config.store.allow_eviction,
    )


__all__ = [
    "MemoryElicitations",
    "SqliteElicitations",
    "configured_backend",
    "open_backend",
]
