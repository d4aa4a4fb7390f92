"""The Teams bot: the SDK's app on `POST /teams/api/messages` over the Conversations service.

A message in a 1:1 chat with the bot, or one that mentions it in a channel or group chat, runs the agent as its
writer's hub user, one conversation per Teams conversation (a channel thread is one); runs of those conversations are
shown in them by the hub that runs them (`Conversations.watch`); the `Action.Execute` presses of question and
approval cards answer through `Conversations.answer`. The SDK verifies every activity's JWT (401 otherwise) before
any handler here runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import httpx
from microsoft_teams.api.activities import AdaptiveCardInvokeActivity, MessageActivity, MessageActivityInput
from microsoft_teams.api.activities.utils import StripMentionsTextOptions
from microsoft_teams.api.models import (
    AdaptiveCardActionCardResponse,
    AdaptiveCardActionMessageResponse,
    AdaptiveCardInvokeResponse,
)
from microsoft_teams.apps import ActivityContext
from starlette.routing import BaseRoute, Route

from elicithub.auth.links import LinkSigner, LinkTickets
from elicithub.config import TeamsConfig
from elicithub.core.ports import KeyValueStore
from elicithub.core.runs import RunRecord, conversation_key
from elicithub.errors import Limited
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.surfaces.reach import Notified, uncounted
from elicithub.surfaces.teams import approval_cards, cards
from elicithub.surfaces.teams.approvals import GroupsOf, TeamsApprovals, no_groups
from elicithub.surfaces.teams.chat import ChatWriter
from elicithub.surfaces.teams.connector import Connector
from elicithub.surfaces.teams.questions import Questions, Shown
from elicithub.surfaces.teams.records import Chat, Person, TeamsRecords, conversation_for
from elicithub.surfaces.teams.sdk import MESSAGING_ENDPOINT, BotToken, HubRoute, build_app, secret

NOT_LINKED = "Sorry, you cannot use this assistant: your Teams account is not linked to a hub user."

_QUESTION_VERBS = (cards.ANSWER, cards.DECLINE, cards.CANCEL, cards.CONNECT)
_APPROVAL_VERBS = (approval_cards.APPROVE, approval_cards.DENY)


class TeamsSurface:
    """The SDK's app and its route; built by the hub when `teams:` is configured (its secrets from the environment)."""

    def __init__(
        self,
        config: TeamsConfig,
        conversations: Conversations,
        store: KeyValueStore,
        links: LinkSigner,
        public_url: str,
        servers: dict[str, str],
        retention_s: float,
        groups: Mapping[str, Collection[str]] | None = None,
        groups_of: GroupsOf | None = None,
        notified: Notified = uncounted,
    ) -> None:
        """`groups`: the hub's static groups (whose members with a Teams account are sent approvals); `groups_of`: a
        person's identity-provider groups, where there are any (who may answer an approval); `notified` counts the
        approval cards and reminders sent (`elicithub_notifications_total{channel="teams"}`)."""
        self.conversations = conversations
        self.users = dict(config.users)
        self.agent = config.agent
        app_id, password = secret(config.app_id_env), secret(config.app_password_env)
        self.http = httpx.AsyncClient(timeout=30)
        self.route = HubRoute()
        token = BotToken(self.http, config.login_url, config.tenant_id, app_id, password)
        self.app = build_app(config, token, self.route)
        self.records = TeamsRecords(store, retention_s)
        self.connector = Connector(self.app.api, self.records, app_id, config.tenant_id, config.service_url)
        self.questions = Questions(
            self.connector, self.records, conversations, links, LinkTickets(store), public_url, self.users, servers
        )
        self.approvals = TeamsApprovals(
            self.connector, self.records, conversations, self.users, groups or {}, groups_of or no_groups, notified
        )
        """Told of approvals by the hub (`hub.approval_notices`): the cards in approvers' chats."""
        self.writer = ChatWriter(self.connector, self.records, conversations, self.questions)
        self._shows: set[asyncio.Task[None]] = set()
        self._listen()
        self.routes: list[BaseRoute] = [Route(MESSAGING_ENDPOINT, self.route.endpoint, methods=["POST"])]
        conversations.watch(self._show)

    def _show(self, run: RunRecord) -> None:
        if run.parent_run_id is None and run.conversation_id.startswith("teams-"):
            task = asyncio.create_task(self.writer.show(run))
            self._shows.add(task)
            task.add_done_callback(self._shows.discard)

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        await self.app.initialize()  # registers the messaging endpoint (and its JWT check) on `self.route`
        try:
            yield
        finally:
            await self.close()

    async def close(self) -> None:
        for task in self._shows:
            task.cancel()
        await asyncio.gather(*self._shows, return_exceptions=True)
        await self.http.aclose()

    def _listen(self) -> None:
        app = self.app

        @app.on_message
        async def message(ctx: ActivityContext[MessageActivity]) -> None:
            await self._message(ctx.activity)

        @app.on_card_action
        async def press(ctx: ActivityContext[AdaptiveCardInvokeActivity]) -> AdaptiveCardInvokeResponse:
            return _response(await self._press(ctx.activity))

    async def _press(self, activity: AdaptiveCardInvokeActivity) -> Shown:
        action = activity.value.action
        data: dict[str, Any] = dict(action.data or {})
        verb = action.verb or ""
        object_id = (activity.from_.aad_object_id or "").lower()
        elicitation_id = str(data.get("elicitationId") or "")
        if verb in _QUESTION_VERBS:
            return await self.questions.press(verb, elicitation_id, object_id, data)
        if verb in _APPROVAL_VERBS:
            return await self.approvals.press(verb, elicitation_id, object_id, data)
        return "This card has nothing to do."

    async def _message(self, activity: MessageActivity) -> None:
        """A person wrote to the bot: run the agent in the Teams conversation's hub conversation, as their hub user."""
        if activity.from_.role == "bot" or not activity.from_.aad_object_id:
            return  # bots (this one too) start no run
        if activity.id and not await self.records.first_delivery(activity.id):
            return
        personal = activity.conversation.conversation_type == "personal"
        if not personal and not activity.is_recipient_mentioned():
            return  # in a channel or a group chat the bot answers when it is mentioned
        object_id = activity.from_.aad_object_id.lower()
        service_url = activity.service_url or ""
        place = (service_url, activity.conversation.id)
        person = Person(activity.from_.id, activity.from_.name or "", service_url)
        await self.records.save_person(object_id, person)
        user_id = self.users.get(object_id)
        if user_id is None:
            await self.connector.post(place, MessageActivityInput(text=NOT_LINKED))
            return
        conversation_id = conversation_for(activity.conversation.id)
        chat = Chat(
            service_url,
            activity.conversation.id,
            personal,
            activity.recipient.id,
            activity.from_.id,
            object_id,
            activity.from_.name or user_id,
            activity.id or "",
        )
        await self.records.save_chat(conversation_key(user_id, conversation_id), chat)
        activity.strip_mentions_text(StripMentionsTextOptions(account_id=activity.recipient.id))
        caller = Caller(user_id, supports_elicitation=True, surface="teams")
        try:
            await self.conversations.send(caller, conversation_id, (activity.text or "").strip(), agent=self.agent)
        except Limited as exc:  # the limits refused it: said where they wrote
            await self.connector.post(place, MessageActivityInput(text=str(exc)))


def _response(shown: Shown) -> AdaptiveCardInvokeResponse:
    """A press's answer: the card to show in place of the one pressed, or a message to the one who pressed."""
    if isinstance(shown, str):
        return AdaptiveCardActionMessageResponse(value=shown)
    return AdaptiveCardActionCardResponse(value=shown)
