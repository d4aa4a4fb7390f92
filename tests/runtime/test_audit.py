"""The audit log on every store: records kept newest first, filtered by tool glob, user and time, a page at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from elicithub.core.ports import Backend
from elicithub.errors import BadRequest
from elicithub.runtime.audit import AuditLog, Filters

pytestmark = pytest.mark.anyio

START = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)


def record(n: int, tool: str, requester: str, answered_by: str | None) -> dict[str, Any]:
    return {
        "elicitationId": f"eli_{n:03d}",
        "at": (START + timedelta(minutes=n)).isoformat(),
        "runId": f"run_{n}",
        "tool": tool,
        "arguments": {"service": "orders"},
        "requester": requester,
        "approvers": {"users": [], "groups": ["ops"]},
        "answeredBy": answered_by,
        "outcome": "approved" if answered_by else "expired",
        "reason": "ok",
    }


async def written(backend: Backend) -> AuditLog:
    audit = AuditLog(backend.kv, 3600)
    for n, (tool, requester, by) in enumerate(
        [
            ("release.rollback", "alice", "carol"),
            ("deploy.deploy_service", "bob", "carol"),
            ("release.promote", "alice", None),
            ("deploy.deploy_service", "alice", "dave"),
            ("release.rollback", "bob", "alice"),
        ]
    ):
        audit.retention_s = 3600 + n  # written one after the other: each later entry outlives the one before
        await audit.write(record(n, tool, requester, by))
    return audit


async def ids(audit: AuditLog, filters: Filters, limit: int = 50) -> list[str]:
    records, _ = await audit.read(filters, limit)
    return [r["elicitationId"] for r in records]


async def test_records_are_kept_and_read_newest_first_on_every_store(backend: Backend) -> None:
    audit = await written(backend)
    records, cursor = await audit.read(Filters(), 50)
    assert [r["elicitationId"] for r in records] == ["eli_004", "eli_003", "eli_002", "eli_001", "eli_000"]
    assert records[-1] == record(0, "release.rollback", "alice", "carol") and cursor is None


async def test_filters_by_tool_glob_user_and_time(backend: Backend) -> None:
    audit = await written(backend)
    assert await ids(audit, Filters(tool="release.*")) == ["eli_004", "eli_002", "eli_000"]
    assert await ids(audit, Filters(tool="deploy.deploy_service")) == ["eli_003", "eli_001"]
    assert await ids(audit, Filters(user="alice")) == ["eli_004", "eli_003", "eli_002", "eli_000"]  # asked or answered
    assert await ids(audit, Filters(user="dave")) == ["eli_003"]
    assert await ids(audit, Filters(since=START + timedelta(minutes=2))) == ["eli_004", "eli_003", "eli_002"]
    assert await ids(audit, Filters(tool="release.*", user="bob")) == ["eli_004"]


async def test_a_listing_reads_a_page_at_a_time(backend: Backend) -> None:
    audit = await written(backend)
    pages: list[list[str]] = []
    cursor = None
    while True:
        records, cursor = await audit.read(Filters(user="alice"), 3, cursor)
        pages.append([r["elicitationId"] for r in records])
        if cursor is None:
            break
    assert pages == [["eli_004", "eli_003", "eli_002"], ["eli_000"]]


async def test_a_cursor_that_is_no_pages_is_refused(backend: Backend) -> None:
    audit = await written(backend)
    for cursor in ("not-base64!", "W10=", "WyJ4IiwgMV0="):  # garbage, [], ["x", 1]
        with pytest.raises(BadRequest, match="cursor"):
            await audit.read(Filters(), 10, cursor)
