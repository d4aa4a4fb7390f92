"""Where everything the hub keeps lives: one backend per store URL, each holding every record kind."""

from __future__ import annotations

from pathlib import Path

from elicithub.core.ports import Backend
from elicithub.errors import StoreUnsupported
from elicithub.store.memory import MemoryBackend
from elicithub.store.memory.elicitations import MemoryElicitations
from elicithub.store.redis import RedisBackend
from elicithub.store.redis.elicitations import RedisElicitations
from elicithub.store.sqlite import SqliteBackend
from elicithub.store.sqlite.elicitations import SqliteElicitations


def open_backend(url: str, *, events_max_len: int = 1000, retention_s: float = 7 * 24 * 3600) -> Backend:
    """The backend a config `store.url` names: memory://, sqlite:///PATH or redis://HOST:PORT/DB."""
    if url == "memory://":
        return MemoryBackend(events_max_len)
    if url.startswith("sqlite:///"):
        return SqliteBackend(Path(url.removeprefix("sqlite:///")), events_max_len)
    if url.startswith("redis://"):
        return RedisBackend(url, events_max_len, retention_s)
    raise StoreUnsupported(f"unsupported store url {url!r}; use memory://, sqlite:///PATH or redis://HOST:PORT/DB")


__all__ = ["MemoryElicitations", "RedisElicitations", "SqliteElicitations", "open_backend"]
