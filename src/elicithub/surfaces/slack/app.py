"""The Slack app: Bolt's async app on `POST /slack/events` over the Conversations service.

Mentions and direct messages run the agent, one conversation per thread; runs of those conversations are shown in
their threads by the instance that runs them (`Conversations.watch`); question buttons and modals answer through
`Conversations.answer`; a modal's searched choice lists get their options here too (`block_suggestion`). Approvers
get direct messages whose buttons and modals answer as them (approvals.py). Bolt verifies every request's signature
and timestamp (401 otherwise) before any listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from elicithub.auth.links import LinkSigner, LinkTickets
from elicithub.config import SlackConfig
from elicithub.core.ports import KeyValueStore
from elicithub.core.runs import RunRecord, conversation_key
from elicithub.errors import Limited, QuestionRefused, SlackUnusable
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.surfaces.reach import Notified, uncounted
from elicithub.surfaces.slack import blocks
from elicithub.surfaces.slack.approval_blocks import APPROVAL_FORM
from elicithub.surfaces.slack.approvals import GroupsOf, SlackApprovals, no_groups
from elicithub.surfaces.slack.questions import Questions
from elicithub.surfaces.slack.records import SlackRecords, Thread, conversation_for
from elicithub.surfaces.slack.thread import ThreadWriter

NOT_LINKED = "Sorry, you cannot use this assistant: your Slack account is not linked to a hub user."


class _RedactLinks(logging.Filter):
    """Sign-in links in the SDK's request logs lose their token, as the hub's access log drops it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "/auth/connect?" in message:
            record.msg, record.args = re.sub(r"(/auth/connect\?)[^\s'\"|>]+", r"\1[redacted]", message), None
        return True


_BOLT_LOG = logging.getLogger("elicithub.slack")
"""Bolt's logger and its Web API client's: the client logs each request body at debug level, and a sign-in link
handed to a person is in one."""
_BOLT_LOG.addFilter(_RedactLinks())


def _secret(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SlackUnusable(f"slack: ${name} is not set; it must hold the Slack app's secret.")
    return value


class SlackSurface:
    """The Bolt app and its route; built by the hub when `slack:` is configured (its secrets from the environment)."""

    def __init__(
        self,
        config: SlackConfig,
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
        """`groups`: the hub's static groups (whose members with a Slack account are sent approvals); `groups_of`: a
        person's identity-provider groups, where there are any (who may answer an approval); `notified`: counts the
        approvals' messages (the hub's metrics)."""
        self.conversations = conversations
        self.users = dict(config.users)
        self.agent = config.agent
        api_url = config.api_url if config.api_url.endswith("/") else config.api_url + "/"
        self.app = AsyncApp(
            token=_secret(config.bot_token_env), signing_secret=_secret(config.signing_secret_env), logger=_BOLT_LOG
        )
        self.client: AsyncWebClient = self.app.client
        self.client.base_url = api_url
        self.records = SlackRecords(store, retention_s)
        self.questions = Questions(
            self.client,
            self.records,
            conversations,
            links,
            LinkTickets(store),
            public_url,
            self.users,
            servers,
        )
        self.approvals = SlackApprovals(
            self.client, self.records, conversations, self.users, groups or {}, groups_of or no_groups, notified
        )
        """Told of approvals by the hub (`hub.approval_notices`): the direct messages to approvers."""
        self.writer = ThreadWriter(self.client, self.records, conversations, self.questions)
        self._shows: set[asyncio.Task[None]] = set()
        self._listen()
        handler = AsyncSlackRequestHandler(self.app)

        async def events(request: Request) -> Response:
            return await handler.handle(request)

        self.routes: list[BaseRoute] = [Route("/slack/events", events, methods=["POST"])]
        conversations.watch(self._show)

    def _show(self, run: RunRecord) -> None:
        if run.parent_run_id is None and run.conversation_id.startswith("slack-"):
            task = asyncio.create_task(self.writer.show(run))
            self._shows.add(task)
            task.add_done_callback(self._shows.discard)

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.close()

    async def close(self) -> None:
        for task in self._shows:
            task.cancel()
        await asyncio.gather(*self._shows, return_exceptions=True)

    def _listen(self) -> None:
        app = self.app

        @app.event("app_mention")
        async def mention(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
            await self._message(body, event, context.bot_user_id)

        @app.event("message")
        async def message(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
            # In channels the bot answers mentions (app_mention); a direct message needs none.
            if event.get("channel_type") == "im":
                await self._message(body, event, context.bot_user_id)

        @app.action(re.compile(r"^elicithub\.(answer|decline|cancel|connect)$"))
        async def press(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            await self._press(self.questions, body, in_thread=True)

        @app.action(re.compile(r"^elicithub\.(approve|deny|edit)$"))
        async def decide(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            await self._press(self.approvals, body, in_thread=False)

        @app.action(blocks.OPEN_LINK)
        async def opened(ack: Any) -> None:
            await ack()  # a link button: Slack opens the URL and tells the app, which has nothing to do

        @app.options("value")  # every input of a question's modal has this action id; only long lists ask
        async def suggest(ack: Any, body: dict[str, Any]) -> None:
            view = body.get("view") or {}
            answering = self.approvals if view.get("callback_id") == APPROVAL_FORM else self.questions
            options = await answering.suggest(
                str(view.get("private_metadata") or ""),
                str(body["user"]["id"]),
                str(body.get("block_id") or ""),
                str(body.get("value") or ""),
            )
            await ack(options=options)

        @app.view(blocks.FORM)
        async def submit(ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
            values = (view.get("state") or {}).get("values") or {}
            await ack(**await self.questions.submit(str(view["private_metadata"]), str(body["user"]["id"]), values))

        @app.view(APPROVAL_FORM)
        async def decided(ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
            values = (view.get("state") or {}).get("values") or {}
            await ack(**await self.approvals.submit(str(view["private_metadata"]), str(body["user"]["id"]), values))

    async def _press(self, answering: Questions | SlackApprovals, body: dict[str, Any], *, in_thread: bool) -> None:
        """A button of a question's message (or of an approval's direct message): a refusal is told to the one who
        pressed it alone, in the question's thread when `in_thread`."""
        action = body["actions"][0]
        slack_user = str(body["user"]["id"])
        try:
            await answering.press(action["action_id"], str(action["value"]), slack_user, body["trigger_id"])
        except QuestionRefused as exc:
            channel = str((body.get("channel") or {}).get("id") or body["container"]["channel_id"])
            thread_ts = (body.get("message") or {}).get("thread_ts") if in_thread else None
            await self.questions.tell(channel, slack_user, thread_ts, str(exc))

    async def _message(self, body: dict[str, Any], event: dict[str, Any], bot_user_id: str | None) -> None:
        """A person wrote to the bot: run the agent in the thread's conversation, as their hub user."""
        if event.get("subtype") or event.get("bot_id") or not event.get("user"):
            return  # edits, joins, and bots (this one too) start no run
        if body.get("event_id") and not await self.records.first_delivery(str(body["event_id"])):
            return
        slack_user = str(event["user"])
        channel = str(event["channel"])
        thread_ts = str(event.get("thread_ts") or event["ts"])
        user_id = self.users.get(slack_user)
        if user_id is None:
            await self.questions.tell(channel, slack_user, thread_ts, NOT_LINKED)
            return
        team = str(body.get("team_id") or event.get("team") or "T")
        conversation_id = conversation_for(team, channel, thread_ts)
        thread = Thread(team, channel, thread_ts, slack_user)
        await self.records.save_thread(conversation_key(user_id, conversation_id), thread)
        text = _text(str(event.get("text") or ""), bot_user_id)
        caller = Caller(user_id, supports_elicitation=True, surface="slack")
        try:
            await self.conversations.send(caller, conversation_id, text, agent=self.agent)
        except Limited as exc:  # told in the thread, as only they see it
            await self.questions.tell(channel, slack_user, thread_ts, str(exc))


def _text(text: str, bot_user_id: str | None) -> str:
    """What the person wrote, without the mention of the bot and with Slack's escapes undone."""
    if bot_user_id:
        text = text.replace(f"<@{bot_user_id}>", "")
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
