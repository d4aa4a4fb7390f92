"""Fixtures and values shared by the core and store tests: the anyio backend, both stores, one form schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from elicithub.store import MemoryStore, SqliteStore
from elicithub.store.base import Store

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "enum": ["eu", "us"]},
        "replicas": {"type": "integer", "minimum": 1},
    },
    "required": ["region"],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "hub.db")
    yield opened
    await opened.close()
