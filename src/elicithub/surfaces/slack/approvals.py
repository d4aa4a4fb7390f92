"""Approvals in Slack: approvers with a Slack account get a direct message with Approve / Deny (and Edit…), are
reminded in its thread, and see it updated when the approval ends; their presses and modals answer as them.

The direct messages are kept on the store (`SlackRecords.add_dm`), so the hub where an approval ends updates them
whichever hub sent them. Who gets one: those a notice reaches (surfaces/reach.py) with a `slack.users` mapping.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import replace
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

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
from elicithub.surfaces.reach import Notified, reached, uncounted
from elicithub.surfaces.slack import approval_blocks, blocks
from elicithub.surfaces.slack.records import DirectMessage, SlackRecords

log = logging.getLogger(__name__)

NOT_LINKED = "Your Slack account is not linked to a hub user, so you cannot answer approvals here."
NOT_YOURS = "This approval is not yours to answer."
OWN_CALL = "This approval is of your own call: another approver must answer it."

GroupsOf = Callable[[str], Awaitable[frozenset[str]]]
"""A person's groups from the identity provider (their latest sign-in's); the static ones are added elsewhere."""


async def no_groups(user_id: str) -> frozenset[str]:
    return frozenset()


class SlackApprovals:
    """An `ApprovalListener` that reaches approvers in Slack, and the answers they give there. `users`: Slack user id
    -> hub user (`slack.users`); `groups`: the hub's static groups; `notified` counts each message sent, or not."""

    def __init__(
        self,
        client: AsyncWebClient,
        records: SlackRecords,
        conversations: Conversations,
        users: Mapping[str, str],
        groups: Mapping[str, Collection[str]],
        groups_of: GroupsOf = no_groups,
        notified: Notified = uncounted,
    ) -> None:
        self.client = client
        self.records = records
        self.conversations = conversations
        self.users = users
        self.groups = groups
        self.groups_of = groups_of
        self.notified = notified

    # -- the listener

    async def added(self, elicitation: Elicitation, to: People) -> None:
        await self._reach(elicitation, to)

    async def escalated(self, elicitation: Elicitation, to: People) -> None:
        await self._reach(elicitation, to)

    async def reminded(self, elicitation: Elicitation, to: People) -> None:
        """A reply in each approver's direct message; one who has none yet (escalated to since) gets one."""
        sent = {dm.slack_user: dm for dm in await self.records.dms(elicitation.id)}
        for slack_user in self._slack_users(elicitation, to):
            dm = sent.get(slack_user)
            try:
                if dm is None:
                    await self._send(elicitation, slack_user)
                else:
                    text = approval_blocks.reminder(elicitation)
                    await self.client.chat_postMessage(channel=dm.channel, thread_ts=dm.ts, text=text)
                    self.notified("slack", "sent")
            except Exception:
                self.notified("slack", "failed")
                log.exception("cannot remind %s of approval %s in Slack", slack_user, elicitation.id)

    async def ended(self, elicitation: Elicitation) -> None:
        """Every direct message of the approval says how it ended, its buttons gone; so does the note in its
        requester's thread, when they asked in Slack."""
        text, shown = approval_blocks.ended_message(elicitation)
        for dm in await self.records.dms(elicitation.id):
            try:
                await self.client.chat_update(channel=dm.channel, ts=dm.ts, text=text, blocks=shown)
            except Exception:
                log.exception("cannot show the end of approval %s to %s in Slack", elicitation.id, dm.slack_user)
        note = await self.records.question(elicitation.id)
        if note is not None and note.mode == "approval" and note.outcome is None:
            text, shown = approval_blocks.waited_message(note.message, elicitation)
            await self.client.chat_update(channel=note.channel, ts=note.ts, text=text, blocks=shown)
            await self.records.save_question(replace(note, outcome=elicitation.outcome))

    async def _reach(self, elicitation: Elicitation, to: People) -> None:
        """A direct message to each of `to` with a Slack account who has none of this approval yet."""
        if elicitation.approval is None or elicitation.approval.approvers is None:
            return  # its requester approves: an ordinary question of their own chat
        sent = {dm.slack_user for dm in await self.records.dms(elicitation.id)}
        for slack_user in self._slack_users(elicitation, to):
            if slack_user not in sent:
                try:
                    await self._send(elicitation, slack_user)
                except Exception:
                    self.notified("slack", "failed")
                    log.exception("cannot ask %s for approval %s in Slack", slack_user, elicitation.id)

    def _slack_users(self, elicitation: Elicitation, to: People) -> list[str]:
        """The Slack accounts of those a notice to `to` reaches."""
        people = reached(elicitation, to, self.groups)
        return sorted(slack_user for slack_user, user in self.users.items() if user in people)

    async def _send(self, elicitation: Elicitation, slack_user: str) -> None:
        opened = await self.client.conversations_open(users=slack_user)
        channel = str(opened["channel"]["id"])
        text, shown = approval_blocks.approval_message(elicitation, named(asked_of(elicitation)))
        posted = await self.client.chat_postMessage(channel=channel, text=text, blocks=shown)
        keep_s = (elicitation.expires_at - utcnow()).total_seconds()
        await self.records.add_dm(elicitation.id, DirectMessage(slack_user, channel, str(posted["ts"])), keep_s)
        self.notified("slack", "sent")

    # -- an approver acts

    async def press(self, action_id: str, elicitation_id: str, slack_user: str, trigger_id: str) -> None:
        """Approve, Deny or Edit… in a direct message; raises QuestionRefused."""
        caller, elicitation = await self._approval(elicitation_id, slack_user)
        if action_id == approval_blocks.APPROVE:
            try:
                await self._answer(caller, elicitation_id, Answer("accept", {"approve": True}))
            except InvalidContent as exc:  # the call's own arguments do not fit its tool's schema
                wrong = "; ".join(f"{e.field}: {e.message}" if e.field else e.message for e in exc.errors)
                raise QuestionRefused(f"Not approved: {wrong}. Deny it, or correct it with Edit….") from None
            return
        view = approval_blocks.deny_view if action_id == approval_blocks.DENY else approval_blocks.edit_view
        await self.client.views_open(trigger_id=trigger_id, view=view(elicitation))

    async def submit(self, metadata: str, slack_user: str, values: dict[str, Any]) -> dict[str, Any]:
        """A submitted Deny or Edit… modal: what to answer Slack with (nothing closes it; errors keep it open)."""
        kind, _, elicitation_id = metadata.partition(":")
        try:
            caller, elicitation = await self._approval(elicitation_id, slack_user)
        except QuestionRefused as exc:
            return {"response_action": "update", "view": blocks.notice_view("Not answered", str(exc))}
        schema = approval_blocks.modal_schema(kind, elicitation)
        content = blocks.content_of(schema, values)
        if kind == "deny":
            content = {"approve": False, **({"reason": content["reason"]} if content.get("reason") else {})}
        try:
            await self._answer(caller, elicitation_id, Answer("accept", content))
        except InvalidContent as exc:
            return {"response_action": "errors", "errors": blocks.modal_errors(schema, exc.errors)}
        except QuestionRefused as exc:
            return {"response_action": "update", "view": blocks.notice_view("Not answered", str(exc))}
        return {}

    async def suggest(self, metadata: str, slack_user: str, block_id: str, typed: str) -> list[blocks.Block]:
        """The choices of a searched field of an open Edit… modal that match what the approver typed."""
        kind, _, elicitation_id = metadata.partition(":")
        try:
            _, elicitation = await self._approval(elicitation_id, slack_user)
        except QuestionRefused:
            return []
        return blocks.suggestions(approval_blocks.modal_schema(kind, elicitation), block_id, typed)

    async def _approval(self, elicitation_id: str, slack_user: str) -> tuple[Caller, Elicitation]:
        """The open approval and the approver pressing, as the approval's rules see them; raises QuestionRefused."""
        user_id = self.users.get(slack_user)
        if user_id is None:
            raise QuestionRefused(NOT_LINKED)
        caller = Caller(user_id, supports_elicitation=True, surface="slack", groups=await self.groups_of(user_id))
        try:
            elicitation = await self.conversations.question(caller, elicitation_id)
        except NotFound:
            raise QuestionRefused(NOT_YOURS) from None
        except SelfApprovalRefused:
            raise QuestionRefused(OWN_CALL) from None
        if elicitation.approval is None or elicitation.approval.approvers is None:
            raise QuestionRefused(NOT_YOURS)  # a question of the caller's own chat, answered there
        if not is_open(elicitation):
            raise QuestionRefused(_ended(elicitation))
        return caller, elicitation

    async def _answer(self, caller: Caller, elicitation_id: str, answer: Answer) -> None:
        """Answer as the approver; raises InvalidContent or QuestionRefused (saying who answered first)."""
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
    label = approval_blocks.ended_label(elicitation).split(" ", 1)[1]
    return f"This approval has ended: {label}."
