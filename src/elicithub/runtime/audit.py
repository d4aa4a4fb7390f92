"""The audit log of approvals: one record per approval (who asked, who could answer, who answered, what, when, why),
kept `audit.retention_s` on the store every hub shares, and read newest first by admins.

It is one list of the store's expiring entries (`KeyValueStore.add_entry` under `audit`), each entry the record's JSON,
which starts with its elicitation id: a page's cursor is where it ended, the entry's lifetime and that start.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import TypedDict

from elicithub.core.approval import PeopleJson
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import Entry, KeyValueStore
from elicithub.errors import BadRequest

KEY = "audit"
PAGE = 200
"""Entries read from the store at a time while a listing filters them."""


class ApprovalRecord(TypedDict):
    """One approval as the log keeps it (`GET /run/api/audit` shows it: surfaces/audit.py): the call's `arguments`
    as called, or as asked when it was not; who could answer (`approvers`); the `outcome` (approved, denied, expired
    or cancelled) and the approver's `reason`, their words alone; `channel`: the surface the answer came through (chat,
    slack, email, ...; None when nobody answered)."""

    elicitationId: str
    at: str
    runId: str
    tool: str
    arguments: JsonObject
    requester: str
    approvers: PeopleJson
    answeredBy: str | None
    channel: str | None
    outcome: str
    reason: str


class BadCursor(BadRequest):
    def __init__(self) -> None:
        super().__init__("cursor: unknown cursor; pass a `nextCursor` as it came, or none.")


@dataclass(frozen=True)
class Filters:
    """`tool`: a glob on SERVER.TOOL (an exact name matches itself); `user`: the requester or the answerer;
    `since`: records at or after it."""

    tool: str | None = None
    user: str | None = None
    since: datetime | None = None

    def keep(self, record: JsonObject) -> bool:
        if self.tool is not None and not fnmatchcase(str(record.get("tool")), self.tool):
            return False
        return self.user is None or self.user in (record.get("requester"), record.get("answeredBy"))


class AuditLog:
    def __init__(self, kv: KeyValueStore, retention_s: float) -> None:
        self.kv = kv
        self.retention_s = retention_s

    async def write(self, record: ApprovalRecord) -> None:
        """Keep `record` (its first key its `elicitationId`), for the retention."""
        ordered: ApprovalRecord = {"elicitationId": record["elicitationId"], **record}
        await self.kv.add_entry(KEY, json.dumps(ordered, separators=(",", ":")), self.retention_s)

    async def read(
        self, filters: Filters, limit: int, cursor: str | None = None
    ) -> tuple[list[JsonObject], str | None]:
        """Up to `limit` records that pass `filters`, newest first, after `cursor`; and the cursor of the next page
        (None when there is none)."""
        before = None if cursor is None else _position(cursor)
        found: list[tuple[Entry, JsonObject]] = []
        while len(found) <= limit:
            page = await self.kv.entries(KEY, PAGE, before)
            for entry in page:
                before = entry
                record = json.loads(entry.value)
                if filters.since is not None and datetime.fromisoformat(record["at"]) < filters.since:
                    return [r for _, r in found], None  # the rest are older still
                if filters.keep(record):
                    found.append((entry, record))
                    if len(found) > limit:
                        break
            if len(page) < PAGE:
                break
        if len(found) > limit:
            return [r for _, r in found[:limit]], _cursor(found[limit - 1][0])
        return [r for _, r in found], None


def _cursor(last: Entry) -> str:
    """Where a page ended, opaque to the client: the entry's lifetime and the start of its value (up to its
    elicitation id), which orders just before the entry itself."""
    start = last.value[: last.value.index(",")] if "," in last.value else last.value
    return base64.urlsafe_b64encode(json.dumps([last.expires_ms, start]).encode()).decode()


def _position(cursor: str) -> Entry:
    try:
        expires_ms, start = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError):
        raise BadCursor() from None
    if type(expires_ms) is not int or not 0 <= expires_ms < 2**63 or not isinstance(start, str):
        raise BadCursor()
    return Entry(expires_ms, start)
