"""The admin's view of the hub: every user's open questions, without their content, and a way to cancel one; as JSON
(`/run/api/admin/questions`) and as the page `/admin`, for admins only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel

from elicithub.runtime.admin import AdminQuestions, OpenQuestion, service_of
from elicithub.surfaces.pages import Welcome, page
from elicithub.surfaces.responses import ErrorBody


class Admins(Protocol):
    """Who may use this view (the hub's `server.admins.Admins`)."""

    async def admin(self, request: Request) -> str:
        """The admin who makes the request; an HTTPException 401 when no one is signed in, 403 for anyone else."""


class QuestionRow(BaseModel):
    """An open question as an admin sees it: whose, where it comes from, how it is asked; never what it asks."""

    elicitationId: str
    user: str
    trigger: str | None
    serverId: str | None
    toolName: str | None
    mode: Literal["form", "url"]
    createdAt: str
    expiresAt: str
    surface: str | None


class QuestionList(BaseModel):
    questions: list[QuestionRow]


class Cancelled(BaseModel):
    elicitationId: str
    outcome: Literal["cancelled"]


def _errors(why: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody, "description": text} for status, text in why.items()}


_REFUSED = {401: "No one is signed in, or a bearer token that names no user.", 403: "Not an admin of this hub."}

UserFilter = Annotated[str | None, Query(min_length=1, description="Only this user's questions.")]
ServerFilter = Annotated[
    str | None, Query(min_length=1, description="Only questions from this MCP server or A2A agent (its id).")
]
AgeFilter = Annotated[
    float | None, Query(ge=0, allow_inf_nan=False, description="Only questions asked at least this many seconds ago.")
]
# Documented, not enforced: an id of another shape is one no question has (404).
ElicitationIdPath = Annotated[
    str, Path(description="The question.", json_schema_extra={"pattern": r"^eli_[A-Za-z0-9_-]+$"})
]


class AdminPages:
    """The routes, with what they need handed over by the hub that builds them: its admins and their questions, and
    what it does for a browser that opens the page."""

    def __init__(self, questions: AdminQuestions, admins: Admins, welcome: Welcome) -> None:
        self.questions = questions
        self.welcome = welcome
        # A dependency: checked before the query and the path, so a stranger learns nothing from them.
        admin = Depends(admins.admin)

        async def listed(
            user: UserFilter = None, server: ServerFilter = None, older_than_s: AgeFilter = None, _: str = admin
        ) -> QuestionList:
            """Every user's open questions, newest first (at most 1000 are read)."""
            found = await self.questions.open(user=user, server=server, older_than_s=older_than_s)
            return QuestionList(questions=[_row(q) for q in found])

        async def cancel(elicitation_id: ElicitationIdPath, who: str = admin) -> Cancelled:
            """Cancel one question, whoever's it is: its run goes on as after its person's cancel (the tool gets the
            cancellation, and the model says so)."""
            resolution = await self.questions.cancel(elicitation_id, who)
            return Cancelled(elicitationId=resolution.elicitation_id, outcome="cancelled")

        self.router = APIRouter()
        self.router.add_api_route(
            "/run/api/admin/questions",
            listed,
            methods=["GET"],
            response_model=QuestionList,
            responses=_errors({**_REFUSED, 422: "A filter that is not of its kind (the message names it)."}),
        )
        self.router.add_api_route(
            "/run/api/admin/questions/{elicitation_id}/cancel",
            cancel,
            methods=["POST"],
            response_model=Cancelled,
            responses=_errors(
                {**_REFUSED, 404: "No question of this id.", 409: "It has ended already.", 410: "Expired."}
            ),
        )
        self.router.add_api_route("/admin", self.page, methods=["GET"], include_in_schema=False)

    async def page(self, request: Request) -> Response:
        """The page: anyone may load it; what it shows comes from the API, which only admins may read."""
        return await page("admin.html", request, self.welcome)


def _row(question: OpenQuestion) -> QuestionRow:
    e = question.elicitation
    return QuestionRow(
        elicitationId=e.id,
        user=e.user_id,
        trigger=e.context.get("trigger"),
        serverId=service_of(e),
        toolName=e.context.get("toolName"),
        mode=e.mode,
        createdAt=_stamp(e.created_at),
        expiresAt=_stamp(e.expires_at),
        surface=question.surface,
    )


def _stamp(when: datetime) -> str:
    """UTC to the second, as the events give `expiresAt`."""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")
