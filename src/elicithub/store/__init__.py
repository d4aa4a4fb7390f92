"""Where elicitations live: the Store protocol and its implementations."""

from __future__ import annotations

from pathlib import Path

from elicithub.store.base import Store
from elicithub.store.memory import MemoryStore
from elicithub.store.redis import RedisStore
from elicithub.store.sqlite import SqliteStore


def open_store(url: str) -> Store:
    """Open the store a config `store.url` names (memory://, sqlite:///PATH or redis://HOST:PORT/DB)."""
    if url == "memory://":
        return MemoryStore()
    if url.startswith("sqlite:///"):
        return SqliteStore(Path(url.removeprefix("sqlite:///")))
    if url.startswith("redis://"):
        return RedisStore(url)
    raise ValueError(f"unsupported store url {url!r}; use memory://, sqlite:///PATH or redis://HOST:PORT/DB")


__all__ = ["MemoryStore", "RedisStore", "SqliteStore", "Store", "open_store"]
