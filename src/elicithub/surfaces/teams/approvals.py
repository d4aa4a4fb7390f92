"""Approvals in Teams: approvers with a Teams account get a card in their 1:1 chat with the bot (the hub opens it),
are reminded there, and see every card updated when the approval ends; their presses answer as them.

The cards are kept on the store (`TeamsRecords.add_card`), so the hub where an approval ends updates them whichever
hub sent them (`ended` fires once, where the run waiting on the approval goes on). Who gets one: see
`surfaces/reach.py` (those with a `teams.users` mapping).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import replace
from typing import Any

from elicithub.core.approval import People
from elicithub.core.elicitation import Answer, Elicitation, utcnow
from elicithub.errors import (
    AlreadyResolved,
    Expired,
    HubError,
    InvalidContent,
    NotFound,
    QuestionRefused,
    SelfApprovalRefused,
)
from elicithub.runtime.approvers import asked_of, named
from elicithub.runtime.conversations import Caller, Conversations, is_open
from elicithub.surfaces.reach import Notified, accounts_of, uncounted
from elicithub.surfaces.teams import approval_cards, cards
from elicithub.surfaces.teams.connector import Connector, card_message, text_message
from elicithub.surfaces.teams.questions import Shown
from elicithub.surfaces.teams.records import ApprovalCard, TeamsRecords

log = logging.getLogger(__name__)

NOT_LINKED = "Your Teams account is not linked to a hub user, so you cannot answer approvals here."
NOT_YOURS = "This approval is not yours to answer."
OWN_CALL = "This approval is of your own call: another approver must answer it."

GroupsOf = Callable[[str], Awaitable[frozenset[str]]]
"""A person's groups from the identity provider (their latest sign-in's); the static ones are added elsewhere."""


async def no_groups(user_id: str) -> frozenset[str]:
    return frozenset()


class TeamsApprovals:
    """An `ApprovalListener` that reaches approvers in Teams, and the answers they give there. `users`: Entra object
    id -> hub user (`teams.users`); `groups`: the hub's static groups; `notified` counts each message sent, or not."""

    def __init__(
        self,
        connector: Connector,
        records: TeamsRecords,
        conversations: Conversations,
        users: Mapping[str, str],
        groups: Mapping[str, Collection[str]],
        groups_of: GroupsOf = no_groups,
        notified: Notified = uncounted,
    ) -> None:
        self.connector = connector
        self.notified = notified
        self.records = records
        self.conversations = conversations
        self.users = users
        self.groups = groups
        self.groups_of = groups_of

    # -- the listener

    async def added(self, elicitation: Elicitation, to: People) -> None:
        await self._reach(elicitation, to)

    async def escalated(self, elicitation: Elicitation, to: People) -> None:
        await self._reach(elicitation, to)

    async def reminded(self, elicitation: Elicitation, to: People) -> None:
        """A message below each approver's card; one who has none yet (escalated to since) gets the card."""
        sent = {card.object_id: card for card in await self.records.cards(elicitation.id)}
        for object_id in self._reached(elicitation, to):
            card = sent.get(object_id)
            try:
                if card is None:
                    await self._send(elicitation, object_id)
                else:
                    place = (card.service_url, card.conversation_id)
                    await self.connector.post(place, text_message(approval_cards.reminder(elicitation)))
                    self.notified("teams", "sent")
            except Exception:
                self.notified("teams", "failed")
                log.exception("cannot remind %s of approval %s in Teams", object_id, elicitation.id)

    async def ended(self, elicitation: Elicitation) -> None:
        """Every approver's card says how the approval ended, its buttons gone; so does the note in its requester's
        conversation, when they asked in Teams."""
        ended = card_message(approval_cards.ended_card(elicitation))
        for card in await self.records.cards(elicitation.id):
            try:
                await self.connector.update((card.service_url, card.conversation_id), card.activity_id, ended)
            except Exception:
                log.exception("cannot show the end of approval %s to %s in Teams", elicitation.id, card.object_id)
        note = await self.records.question(elicitation.id)
        if note is not None and note.mode == "approval" and note.outcome is None:
            waited = card_message(approval_cards.waited_card(note.message, elicitation))
            await self.connector.update((note.service_url, note.conversation_id), note.activity_id, waited)
            await self.records.save_question(replace(note, outcome=elicitation.outcome))

    async def _reach(self, elicitation: Elicitation, to: People) -> None:
        """A card to each of `to` with a Teams account who has none of this approval yet."""
        if elicitation.approval is None or elicitation.approval.approvers is None:
            return  # its requester approves: an ordinary question of their own conversation
        sent = {card.object_id for card in await self.records.cards(elicitation.id)}
        for object_id in self._reached(elicitation, to):
            if object_id not in sent:
                try:
                    await self._send(elicitation, object_id)
                except Exception:
                    self.notified("teams", "failed")
                    log.exception("cannot ask %s for approval %s in Teams", object_id, elicitation.id)

    def _reached(self, elicitation: Elicitation, to: People) -> list[str]:
        return accounts_of(to, elicitation.user_id, self.groups, self.users)

    async def _send(self, elicitation: Elicitation, object_id: str) -> None:
        chat = await self.connector.open_chat(object_id)
        if chat is None:
            self.notified("teams", "failed")
            log.warning("cannot open a Teams chat with %s: no service_url configured, and none seen yet", object_id)
            return
        card = approval_cards.approval_card(elicitation, named(asked_of(elicitation)))
        activity_id = await self.connector.post(chat, card_message(card))
        keep_s = (elicitation.expires_at - utcnow()).total_seconds()
        await self.records.add_card(elicitation.id, ApprovalCard(object_id, *chat, activity_id), keep_s)
        self.notified("teams", "sent")

    # -- an approver presses

    async def press(self, verb: str, elicitation_id: str, object_id: str, data: dict[str, Any]) -> Shown:
        """Approve or Deny on an approver's card: the card once the approval ended, the card again with the errors of
        an edit that does not fit, or what refused the press."""
        try:
            caller, elicitation = await self._approval(elicitation_id, object_id)
            edits = approval_cards.edit_schema(elicitation)
            reason = str(data.get(approval_cards.REASON) or "").strip()
            content: dict[str, Any] = {"approve": verb == approval_cards.APPROVE}
            if verb == approval_cards.APPROVE:
                content.update(cards.content_of(edits, data))
            if reason:
                content["reason"] = reason
            try:
                await self._answer(caller, elicitation_id, Answer("accept", content))
            except InvalidContent as exc:
                errors = cards.field_errors(edits, exc.errors)
                return approval_cards.approval_card(elicitation, named(asked_of(elicitation)), data, errors)
            return approval_cards.ended_card(await self.conversations.question(caller, elicitation_id))
        except QuestionRefused as exc:
            return str(exc)

    async def _approval(self, elicitation_id: str, object_id: str) -> tuple[Caller, Elicitation]:
        """The open approval and the approver pressing, as the approval's rules see them; raises QuestionRefused."""
        user_id = self.users.get(object_id)
        if user_id is None:
            raise QuestionRefused(NOT_LINKED)
        caller = Caller(user_id, supports_elicitation=True, surface="teams", groups=await self.groups_of(user_id))
        try:
            elicitation = await self.conversations.question(caller, elicitation_id)
        except NotFound:
            raise QuestionRefused(NOT_YOURS) from None
        except SelfApprovalRefused:
            raise QuestionRefused(OWN_CALL) from None
        if elicitation.approval is None or elicitation.approval.approvers is None:
            raise QuestionRefused(NOT_YOURS)  # a question of the caller's own conversation, answered there
        if not is_open(elicitation):
            raise QuestionRefused(_ended(elicitation))
        return caller, elicitation

    async def _answer(self, caller: Caller, elicitation_id: str, answer: Answer) -> None:
        """Answer as the approver; raises InvalidContent or QuestionRefused (saying how it ended first)."""
        try:
            await self.conversations.answer(caller, elicitation_id, answer)
        except InvalidContent:
            raise
        except (AlreadyResolved, Expired):
            try:
                ended = await self.conversations.question(caller, elicitation_id)
            except HubError:
                raise QuestionRefused("This approval has ended.") from None
            raise QuestionRefused(_ended(ended)) from None
        except HubError as exc:
            raise QuestionRefused(str(exc)) from None


def _ended(elicitation: Elicitation) -> str:
    if elicitation.outcome is None or elicitation.outcome == "expired":
        return "This approval has expired."
    return f"This approval has ended: {approval_cards.ended_label(elicitation).split(' ', 1)[1]}."
