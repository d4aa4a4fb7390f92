"""The audit log of approvals as admins read it: `GET /run/api/audit`, newest first, filtered and paged."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from elicithub.runtime.audit import AuditLog, Filters
from elicithub.surfaces.pages.admin import Admins
from elicithub.surfaces.responses import ErrorBody


class AuditRecord(BaseModel):
    """One approval: the call (`tool`, its `arguments` as called, or as asked when it was not), who asked, who could
    answer, who did and through which `channel` (the surface: chat for the hub's HTTP API, the widget and the inbox;
    mcp, a2a, agui, slack, email; null when nobody answered), how it ended (approved, denied, expired, cancelled) and
    the approver's `reason` in their own words (`""` when they gave none, or nobody answered)."""

    at: str
    elicitationId: str
    runId: str
    tool: str
    arguments: dict[str, Any]
    requester: str
    approvers: dict[str, list[str]]
    answeredBy: str | None
    channel: str | None = None
    outcome: str
    reason: str


class AuditPage(BaseModel):
    records: list[AuditRecord]
    nextCursor: str | None


ToolFilter = Annotated[
    str | None, Query(min_length=1, description="A glob on SERVER.TOOL (`release.*`); an exact name matches itself.")
]
UserFilter = Annotated[str | None, Query(min_length=1, description="Records this user asked or answered.")]
SinceFilter = Annotated[
    datetime | None, Query(description="ISO 8601; records at or after it (without an offset: UTC).")
]
Limit = Annotated[int, Query(ge=1, le=500, description="Records per page.")]
Cursor = Annotated[str | None, Query(min_length=1, description="The `nextCursor` of the page before.")]


class AuditPages:
    def __init__(self, audit: AuditLog, admins: Admins) -> None:
        self.audit = audit
        admin = Depends(admins.admin)  # checked before the query: a stranger learns nothing from it

        async def listed(
            tool: ToolFilter = None,
            user: UserFilter = None,
            since: SinceFilter = None,
            limit: Limit = 50,
            cursor: Cursor = None,
            _: str = admin,
        ) -> AuditPage:
            """Every approval's record kept (`audit.retention_s`), newest first."""
            if since is not None and since.tzinfo is None:
                since = since.replace(tzinfo=UTC)
            records, next_cursor = await self.audit.read(Filters(tool, user, since), limit, cursor)
            return AuditPage(records=[AuditRecord.model_validate(r) for r in records], nextCursor=next_cursor)

        self.router = APIRouter()
        refused = {
            400: "A cursor that is no page's.",
            401: "No one is signed in, or a bearer token that names no user.",
            403: "Not an admin of this hub.",
            422: "A filter that is not of its kind (the message names it).",
        }
        self.router.add_api_route(
            "/run/api/audit",
            listed,
            methods=["GET"],
            response_model=AuditPage,
            responses={s: {"model": ErrorBody, "description": d} for s, d in refused.items()},
        )
