"""Questions in Slack: post one in its thread, hand a sign-in link to its person only, open the form's modal,
take answers from buttons and modals, and show each question's end."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from slack_sdk.web.async_client import AsyncWebClient

from elicithub.auth.links import LinkSigner, LinkTickets
from elicithub.core.elicitation import Answer, Elicitation, State, utcnow
from elicithub.errors import AlreadyResolved, Expired, HubError, InvalidContent, NotFound, QuestionRefused
from elicithub.runtime.approvers import asked_of, named
from elicithub.runtime.conversations import Caller, Conversations, is_open
from elicithub.surfaces.slack import approval_blocks, blocks
from elicithub.surfaces.slack.records import PostedQuestion, SlackRecords, Thread

NOT_OPEN = "This question is no longer open."


class Questions:
    """Every instance has one; what it needs to know of a question it reads from the store."""

    def __init__(
        self,
        client: AsyncWebClient,
        records: SlackRecords,
        conversations: Conversations,
        links: LinkSigner,
        tickets: LinkTickets,
        public_url: str,
        users: dict[str, str],
        servers: dict[str, str],
    ) -> None:
        self.client = client
        self.records = records
        self.conversations = conversations
        self.links = links
        self.tickets = tickets
        self.public_url = public_url.rstrip("/")
        self.users = users
        self.servers = servers  # server id -> the name people know it by

    # -- showing

    async def post(self, elicitation: Elicitation, thread: Thread) -> None:
        """Post a question in its thread once (a resumed run shows its questions again: they are there already)."""
        if await self.records.question(elicitation.id) is not None:
            return
        path = elicitation.context.get("agentPath")
        agents = [str(a) for a in path] if isinstance(path, list) else None
        widget = None
        if elicitation.mode == "form" and not blocks.fits_modal(elicitation.requested_schema or {}):
            widget = f"{self.public_url}/?{urlencode({'conversation': elicitation.conversation_id})}"
        mode: str = elicitation.mode
        message = elicitation.message
        text, shown = blocks.question_message(elicitation.id, mode, message, thread.slack_user, agents, widget)
        if not elicitation.asks_requester:  # an approval its approvers answer (approvals.py shows its end here)
            mode = "approval"
            text, shown = approval_blocks.waiting_message(named(asked_of(elicitation)))
            message = text
        posted = await self.client.chat_postMessage(
            channel=thread.channel, thread_ts=thread.thread_ts, text=text, blocks=shown
        )
        server = str(elicitation.context.get("serverId") or "")
        question = PostedQuestion(
            elicitation.id,
            str(posted["channel"]),
            str(posted["ts"]),
            thread.thread_ts,
            thread.slack_user,
            elicitation.user_id,
            mode,
            message,
            self.servers.get(server, server),
        )
        await self.records.save_question(question)
        if elicitation.mode == "url":
            await self.hand_link(question, elicitation)

    async def finish(self, elicitation_id: str, outcome: str) -> None:
        """Show how a question ended, its buttons gone (once: a replayed run sees the end again)."""
        question = await self.records.question(elicitation_id)
        if question is None or question.outcome == outcome or question.mode == "approval":
            return
        text, shown = blocks.ended_message(question.mode, question.message, outcome)
        await self.client.chat_update(channel=question.channel, ts=question.ts, text=text, blocks=shown)
        await self.records.save_question(replace(question, outcome=outcome))

    async def hand_link(self, question: PostedQuestion, elicitation: Elicitation) -> None:
        """Send the sign-in link to the asked person only. A hub sign-in link gets a ticket of its own: opened
        without a hub session (as from Slack), it is accepted once."""
        url = elicitation.url or ""
        if url.startswith(f"{self.public_url}/auth/connect?"):
            remaining = (elicitation.expires_at - utcnow()).total_seconds()
            ticket = await self.tickets.issue(remaining)
            token = self.links.sign(elicitation.id, elicitation.user_id, once=ticket)
            url = f"{self.public_url}/auth/connect?{urlencode({'t': token})}"
        text, shown = blocks.connect_link(question.server, url)
        await self.client.chat_postEphemeral(
            channel=question.channel, user=question.slack_user, thread_ts=question.thread_ts, text=text, blocks=shown
        )

    # -- a person acts

    async def asked(self, elicitation_id: str, slack_user: str) -> tuple[PostedQuestion, Elicitation]:
        """The question and its elicitation, if `slack_user` is the one it was asked of and it is still open."""
        question = await self.records.question(elicitation_id)
        if question is None:
            raise QuestionRefused(NOT_OPEN)
        if slack_user != question.slack_user or self.users.get(slack_user) != question.user_id:
            raise QuestionRefused(f"This question is for <@{question.slack_user}>.")
        if question.mode == "approval":
            raise QuestionRefused("This approval is for its approvers to answer.")
        try:
            elicitation = await self.conversations.question(_caller(question), elicitation_id)
        except NotFound:
            raise QuestionRefused(NOT_OPEN) from None
        if not is_open(elicitation):
            raise QuestionRefused(_ended(elicitation))
        return question, elicitation

    async def press(self, action_id: str, elicitation_id: str, slack_user: str, trigger_id: str) -> None:
        """A button of a question's message; raises QuestionRefused."""
        question, elicitation = await self.asked(elicitation_id, slack_user)
        if action_id == blocks.CONNECT:
            await self.hand_link(question, elicitation)
        elif action_id == blocks.ANSWER:
            view = blocks.form_view(elicitation.id, elicitation.message, elicitation.requested_schema or {})
            await self.client.views_open(trigger_id=trigger_id, view=view)
        else:
            await self.respond(question, Answer("decline" if action_id == blocks.DECLINE else "cancel"))

    async def suggest(self, elicitation_id: str, slack_user: str, block_id: str, typed: str) -> list[blocks.Block]:
        """The choices of a searched field of an open modal that match what its person typed; none to anyone else,
        or once the question has ended."""
        try:
            _, elicitation = await self.asked(elicitation_id, slack_user)
        except QuestionRefused:
            return []
        return blocks.suggestions(elicitation.requested_schema or {}, block_id, typed)

    async def submit(self, elicitation_id: str, slack_user: str, values: dict[str, Any]) -> dict[str, Any]:
        """A submitted modal: what to answer Slack with (nothing closes it; errors keep it open per field)."""
        try:
            question, elicitation = await self.asked(elicitation_id, slack_user)
        except QuestionRefused as exc:
            return {"response_action": "update", "view": blocks.notice_view("Not answered", str(exc))}
        schema = elicitation.requested_schema or {}
        try:
            await self.respond(question, Answer("accept", blocks.content_of(schema, values)))
        except InvalidContent as exc:
            return {"response_action": "errors", "errors": blocks.modal_errors(schema, exc.errors)}
        except QuestionRefused as exc:
            return {"response_action": "update", "view": blocks.notice_view("Not answered", str(exc))}
        return {}

    async def respond(self, question: PostedQuestion, answer: Answer) -> None:
        """Answer through the conversation service, as the asked hub user; raises InvalidContent or QuestionRefused."""
        try:
            await self.conversations.answer(_caller(question), question.elicitation_id, answer)
        except InvalidContent:
            raise
        except Expired:
            raise QuestionRefused("This question has expired.") from None
        except AlreadyResolved:
            raise QuestionRefused("This question was already answered.") from None
        except HubError as exc:
            raise QuestionRefused(str(exc)) from None

    async def tell(self, channel: str, slack_user: str, thread_ts: str | None, text: str) -> None:
        """An ephemeral note to one person."""
        await self.client.chat_postEphemeral(channel=channel, user=slack_user, thread_ts=thread_ts, text=text)


def _caller(question: PostedQuestion) -> Caller:
    """The hub user a question was asked of, answering from Slack."""
    return Caller(question.user_id, supports_elicitation=True, surface="slack")


def _ended(elicitation: Elicitation) -> str:
    if elicitation.state is State.PENDING or elicitation.state is State.EXPIRED:
        return "This question has expired."
    return f"This question was already {elicitation.state.value}."
