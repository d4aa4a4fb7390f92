"""The pages a mail's links open, `/email/{page}/{token}`. GET and HEAD only show (mail scanners and link previews
fetch every link, some with a browser): the question and its decision, or how it ended. Only the page's own POST
answers, with the form token the page carries, as the link's recipient, through the channel `email`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from elicithub.core.approval import DECISION_FIELDS
from elicithub.core.elicitation import Answer, Elicitation
from elicithub.errors import AlreadyResolved, Expired, InvalidContent, NotFound, SelfApprovalRefused
from elicithub.runtime.conversations import Caller, Conversations, is_open
from elicithub.surfaces.email import views
from elicithub.surfaces.email.forms import Submitted, content_of
from elicithub.surfaces.email.links import KINDS, MailLink, MailLinks

GroupsOf = Callable[[str], Awaitable[frozenset[str]]]
"""A person's groups from the identity provider (their latest sign-in's); the static ones are added elsewhere."""

FORM_MAX_BYTES = 64 * 1024


async def no_groups(user_id: str) -> frozenset[str]:
    return frozenset()


class MailPages:
    def __init__(self, conversations: Conversations, links: MailLinks, groups_of: GroupsOf = no_groups) -> None:
        self.conversations = conversations
        self.links = links
        self.groups_of = groups_of
        self.routes: list[BaseRoute] = [
            Route("/email/{page}/{token}", self.show, methods=["GET", "HEAD"]),
            Route("/email/{page}/{token}", self.answer, methods=["POST"]),
        ]

    async def _opened(self, request: Request) -> tuple[str, MailLink, Caller, Elicitation] | None:
        """The page, the link, its recipient and its question, as the recipient may see it; None for a link that is
        not one, or a page that is not its question's."""
        page, link = request.path_params["page"], self.links.open(request.path_params["token"])
        if page not in KINDS or link is None:
            return None
        caller = Caller(link.user_id, True, "email", groups=await self.groups_of(link.user_id))
        try:
            elicitation = await self.conversations.question(caller, link.elicitation_id)
        except (NotFound, SelfApprovalRefused):
            return None
        own = elicitation.user_id == link.user_id and elicitation.asks_requester
        routed = elicitation.approval is not None and elicitation.approval.approvers is not None
        if (page == "answer" and not own) or (page != "answer" and not routed) or elicitation.mode != "form":
            return None
        return page, link, caller, elicitation

    async def show(self, request: Request) -> Response:
        """Shows, never answers."""
        opened = await self._opened(request)
        if opened is None:
            return views.not_found()
        page, link, _, elicitation = opened
        if not is_open(elicitation):
            return views.ended(elicitation)
        return views.decision(elicitation, page, link.token, link.user_id, self.links.form_token(link))

    async def answer(self, request: Request) -> Response:
        opened = await self._opened(request)
        if opened is None:
            return views.not_found()
        page, link, caller, elicitation = opened
        body = await request.body()
        submitted: Submitted = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        # The form token proves the POST comes from the page the hub served; a browser's own word on where it comes
        # from is one more check (the page's no-referrer policy makes its Origin "null", so that is not read).
        fetched_from = request.headers.get("sec-fetch-site", "same-origin")
        token = submitted.get("csrf", [""])[0]
        if len(body) > FORM_MAX_BYTES or fetched_from == "cross-site" or not self.links.form_ok(link, token):
            return views.refused(
                "This form did not come from the link's page. Open the link from your mail again.", 403
            )
        if not is_open(elicitation):
            return views.ended(elicitation, 409)
        answer = _answer(page, elicitation, submitted)
        try:
            await self.conversations.check(caller, elicitation.id, answer)
        except InvalidContent as exc:
            form_token = self.links.form_token(link)
            return views.decision(elicitation, page, link.token, link.user_id, form_token, submitted, exc.errors)
        except Expired:
            return await self._ended(caller, elicitation, 410)
        if not await self.links.use(link):
            return views.refused("This link has answered already; it answers once.", 409)
        try:
            await self.conversations.answer(caller, elicitation.id, answer)
        except (AlreadyResolved, Expired):
            return await self._ended(caller, elicitation, 409)
        # Back to the page (which now shows the end): a reload shows it again rather than posting twice.
        return RedirectResponse(self.links.url(page, link.token), status_code=303, headers=views.HEADERS)

    async def _ended(self, caller: Caller, elicitation: Elicitation, status: int) -> Response:
        """How it ended, when an answer from elsewhere came first."""
        return views.ended(await self.conversations.question(caller, elicitation.id), status)


def _answer(page: str, elicitation: Elicitation, submitted: Submitted) -> Answer:
    reason = submitted.get("reason", [""])[0].strip()
    why = {"reason": reason} if reason else {}
    if page == "deny":
        return Answer("accept", {"approve": False, **why})
    if page == "approve":
        properties = (elicitation.requested_schema or {}).get("properties") or {}
        edits = {n: p for n, p in properties.items() if n not in DECISION_FIELDS}
        return Answer("accept", {**content_of({"properties": edits}, submitted), "approve": True, **why})
    if submitted.get("action", [""])[0] == "decline":
        return Answer("decline")
    return Answer("accept", content_of(elicitation.requested_schema or {}, submitted))
