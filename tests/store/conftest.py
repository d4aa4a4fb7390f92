"""What the store tests share: counting the Redis round trips a process makes."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio.connection


class Sent:
    """The requests the redis-py connections of this process write; one write is one round trip (a pipeline or a
    script call is one)."""

    def __init__(self) -> None:
        self.requests: list[str] = []


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    record = Sent()
    original = redis.asyncio.connection.AbstractConnection.send_packed_command

    async def counted(self: Any, command: Any, check_health: bool = True) -> None:
        record.requests.append(_first_command(command))
        await original(self, command, check_health)

    monkeypatch.setattr(redis.asyncio.connection.AbstractConnection, "send_packed_command", counted)
    return record


def _first_command(packed: Any) -> str:
    data = b"".join(bytes(chunk) for chunk in (packed if isinstance(packed, list) else [packed]))
    fields = data.split(b"\r\n")
    return fields[2].decode(errors="replace").upper() if len(fields) > 2 else "?"
