"""Questions in Teams: post one as a card in its conversation, hand a sign-in link to its person only, take the
presses of its card's buttons, and show each question's end, to everyone, with what was chosen and by whom."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from microsoft_teams.cards import AdaptiveCard

from elicithub.auth.links import LinkSigner, LinkTickets
from elicithub.core.elicitation import Answer, Elicitation, State, utcnow
from elicithub.errors import AlreadyResolved, Expired, HubError, InvalidContent, NotFound, QuestionRefused
from elicithub.runtime.approvers import asked_of, named
from elicithub.runtime.conversations import Caller, Conversations, is_open
from elicithub.surfaces.teams import approval_cards, cards
from elicithub.surfaces.teams.connector import Connector, card_message
from elicithub.surfaces.teams.records import Chat, PostedQuestion, TeamsRecords

NOT_OPEN = "This question is no longer open."
LINK_SENT = "The sign-in link was sent to your chat with the bot."

Shown = AdaptiveCard | str
"""What a press shows the person who pressed: a card in place of the one pressed, or a message."""


class Questions:
    """Every hub has one; what it needs to know of a question it reads from the store."""

    def __init__(
        self,
        connector: Connector,
        records: TeamsRecords,
        conversations: Conversations,
        links: LinkSigner,
        tickets: LinkTickets,
        public_url: str,
        users: dict[str, str],
        servers: dict[str, str],
    ) -> None:
        self.connector = connector
        self.records = records
        self.conversations = conversations
        self.links = links
        self.tickets = tickets
        self.public_url = public_url.rstrip("/")
        self.users = users  # Entra object id -> hub user
        self.servers = servers  # server id -> the name people know it by

    # -- showing

    async def post(self, elicitation: Elicitation, chat: Chat) -> None:
        """Post a question's card once (a resumed run shows its questions again: they are there already)."""
        if await self.records.question(elicitation.id) is not None:
            return
        server = str(elicitation.context.get("serverId") or "")
        mode: str = elicitation.mode
        message = elicitation.message
        link = None
        if not elicitation.asks_requester:  # an approval its approvers answer (approvals.py shows its end here)
            mode = "approval"
            message = approval_cards.waiting(named(asked_of(elicitation)))
            card = approval_cards.waiting_card(message)
        elif elicitation.mode == "url":
            link = await self.link(elicitation)
            card = cards.sign_in_card(elicitation.id, message, chat.name, link if chat.personal else None)
        else:
            card = self._form(elicitation, chat.name)
        place = (chat.service_url, chat.conversation_id)
        activity_id = await self.connector.post(place, card_message(card))
        question = PostedQuestion(
            elicitation.id,
            chat.service_url,
            chat.conversation_id,
            activity_id,
            chat.object_id,
            chat.name,
            elicitation.user_id,
            mode,
            message,
            self.servers.get(server, server),
            chat.personal,
        )
        await self.records.save_question(question)
        if link is not None and not chat.personal:
            await self.hand_link(question, link)

    def _form(self, elicitation: Elicitation, asked: str) -> AdaptiveCard:
        path = elicitation.context.get("agentPath")
        agents = [str(a) for a in path] if isinstance(path, list) else None
        schema = elicitation.requested_schema or {}
        card = cards.question_card(elicitation.id, elicitation.message, schema, asked, agents)
        if cards.fits(card):
            return card
        widget = f"{self.public_url}/?{urlencode({'conversation': elicitation.conversation_id})}"
        return cards.widget_card(elicitation.id, elicitation.message, asked, widget)

    async def finish(self, elicitation_id: str, outcome: str) -> None:
        """Show how a question ended, for everyone: its buttons gone, what was chosen and who answered (once: a
        replayed run sees the end again)."""
        question = await self.records.question(elicitation_id)
        if question is None or question.outcome == outcome or question.mode == "approval":
            return
        card = await self._ended(question, outcome)
        place = (question.service_url, question.conversation_id)
        await self.connector.update(place, question.activity_id, card_message(card))
        await self.records.save_question(replace(question, outcome=outcome))

    async def _ended(self, question: PostedQuestion, outcome: str) -> AdaptiveCard:
        answered: list[tuple[str, str]] = []
        if outcome == "accepted" and question.mode == "form":
            try:
                elicitation = await self.conversations.question(_caller(question), question.elicitation_id)
            except HubError:
                elicitation = None
            if elicitation is not None and elicitation.answer is not None:
                answered = cards.answered_facts(elicitation.requested_schema or {}, elicitation.answer.content)
        by = question.name if outcome in ("accepted", "declined") else None
        return cards.ended_card(question.mode, question.message, outcome, by, answered)

    async def link(self, elicitation: Elicitation) -> str:
        """The sign-in link for the asked person. A hub sign-in link gets a ticket of its own: opened without a hub
        session (as from Teams), it is accepted once."""
        url = elicitation.url or ""
        if url.startswith(f"{self.public_url}/auth/connect?"):
            remaining = (elicitation.expires_at - utcnow()).total_seconds()
            ticket = await self.tickets.issue(remaining)
            token = self.links.sign(elicitation.id, elicitation.user_id, once=ticket)
            url = f"{self.public_url}/auth/connect?{urlencode({'t': token})}"
        return url

    async def hand_link(self, question: PostedQuestion, url: str) -> None:
        """Send the sign-in link to the asked person's own 1:1 chat with the bot, which nobody else sees."""
        chat = await self.connector.open_chat(question.object_id)
        if chat is None:
            raise QuestionRefused("The hub cannot open your chat with the bot yet: write to it there first.")
        await self.connector.post(chat, card_message(cards.link_card(question.server, url)))

    # -- a person presses

    async def asked(self, elicitation_id: str, object_id: str) -> tuple[PostedQuestion, Elicitation]:
        """The question and its elicitation, if `object_id` is the one it was asked of and it is still open."""
        question = await self.records.question(elicitation_id)
        if question is None:
            raise QuestionRefused(NOT_OPEN)
        if object_id != question.object_id or self.users.get(object_id) != question.user_id:
            raise QuestionRefused(f"This question is for {question.name}.")
        if question.mode == "approval":
            raise QuestionRefused("This approval is for its approvers to answer.")
        try:
            elicitation = await self.conversations.question(_caller(question), elicitation_id)
        except NotFound:
            raise QuestionRefused(NOT_OPEN) from None
        if not is_open(elicitation):
            raise QuestionRefused(_ended(elicitation))
        return question, elicitation

    async def press(self, verb: str, elicitation_id: str, object_id: str, data: dict[str, Any]) -> Shown:
        """A button of a question's card: what the presser sees next (another's press changes nothing)."""
        try:
            question, elicitation = await self.asked(elicitation_id, object_id)
            if verb == cards.CONNECT:
                link = await self.link(elicitation)
                if question.personal:  # the card again, for its person alone, with a fresh link
                    return cards.sign_in_card(elicitation_id, question.message, question.name, link)
                await self.hand_link(question, link)
                return LINK_SENT
            if verb == cards.DECLINE:
                await self.respond(question, Answer("decline"))
                return await self._ended(question, "declined")
            if verb == cards.CANCEL:
                await self.respond(question, Answer("cancel"))
                return await self._ended(question, "cancelled")
            schema = elicitation.requested_schema or {}
            try:
                await self.respond(question, Answer("accept", cards.content_of(schema, data)))
            except InvalidContent as exc:  # the card again, with what was sent and the errors under their fields
                errors = cards.field_errors(schema, exc.errors)
                name, message = question.name, elicitation.message
                return cards.question_card(elicitation_id, message, schema, name, None, data, errors)
            return await self._ended(question, "accepted")
        except QuestionRefused as exc:
            return str(exc)

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


def _caller(question: PostedQuestion) -> Caller:
    """The hub user a question was asked of, answering from Teams."""
    return Caller(question.user_id, supports_elicitation=True, surface="teams")


def _ended(elicitation: Elicitation) -> str:
    if elicitation.state is State.PENDING or elicitation.state is State.EXPIRED:
        return "This question has expired."
    return f"This question was already {elicitation.state.value}."
