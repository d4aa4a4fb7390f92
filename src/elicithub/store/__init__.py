"""Where elicitations live: the Store protocol and its implementations."""

from __future__ import annotations

from pathlib import Path

from elicithub.store.base import Store
from elicithub.store.memory import MemoryStore
from elicithub.store.sqlite import SqliteStore


def open_store(url: str) -> Store:
    """Open the store a config `store.url` names (memory:// or sqlite:///PATH)."""
    if url == "memory://":
        return MemoryStore()
    if url.startswith("sqlite:///"):
        return SqliteStore(Path(url.removeprefix("sqlite:///")))
    raise ValueError(f"unsupported store url {url!r}; use memory:// or sqlite:///PATH")


__all__ = ["MemoryStore", "SqliteStore", "Store", "open_store"]
