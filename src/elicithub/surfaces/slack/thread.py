"""One run shown in its Slack thread: replies that grow by editing the bot's message, questions, and their ends."""

from __future__ import annotations

import logging
import time

from slack_sdk.web.async_client import AsyncWebClient

from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    RunFinished,
    RunPaused,
    TextDelta,
)
from elicithub.core.runs import RunRecord, ToolCall, conversation_key
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.surfaces.slack.questions import Questions
from elicithub.surfaces.slack.records import SlackRecords, Thread
from elicithub.surfaces.slack.text import escape

log = logging.getLogger(__name__)

UPDATE_INTERVAL_S = 1.0
"""A growing reply is edited at most this often (Slack rate-limits chat.update to about one a second per message)."""

_MESSAGE_MAX = 39_000  # Slack cuts text at 40,000 characters


class Reply:
    """A stretch of the bot's text between questions: posted with its first text, then edited as it grows (at
    most once per UPDATE_INTERVAL_S, and once more when it is complete)."""

    def __init__(self, client: AsyncWebClient, records: SlackRecords, thread: Thread, run_id: str, index: int) -> None:
        self.client = client
        self.records = records
        self.thread = thread
        self.key = (run_id, index)
        self.text = ""
        self.ts: str | None = None
        self.shown = ""
        self.shown_at = 0.0

    async def add(self, text: str) -> None:
        self.text += text
        if self.ts is None or time.monotonic() - self.shown_at >= UPDATE_INTERVAL_S:
            await self._show()

    async def flush(self) -> None:
        """Show all the text so far (the stretch is complete, or the run goes off to call a tool)."""
        if self.text != self.shown:
            await self._show()

    async def _show(self) -> None:
        text = escape(self.text)[:_MESSAGE_MAX] or " "
        if self.ts is None:
            # A run shown again (after a restart) edits the messages it posted before instead of posting twice.
            self.ts = await self.records.reply(*self.key)
        if self.ts is None:
            posted = await self.client.chat_postMessage(
                channel=self.thread.channel, thread_ts=self.thread.thread_ts, text=text
            )
            self.ts = str(posted["ts"])
            await self.records.save_reply(*self.key, self.ts)
        else:
            await self.client.chat_update(channel=self.thread.channel, ts=self.ts, text=text)
        self.shown, self.shown_at = self.text, time.monotonic()


class ThreadWriter:
    """Shows runs of Slack conversations in their threads; each run is shown by the instance that runs it."""

    def __init__(
        self, client: AsyncWebClient, records: SlackRecords, conversations: Conversations, questions: Questions
    ) -> None:
        self.client = client
        self.records = records
        self.conversations = conversations
        self.questions = questions

    async def show(self, run: RunRecord) -> None:
        """Follow the run from its start to its end and show it; a run that is not in a Slack thread is left alone."""
        try:
            await self._show(run)
        except Exception:
            log.exception("showing run %s in Slack stopped", run.run_id)

    async def _show(self, run: RunRecord) -> None:
        if run.user_id is None:
            return
        thread = await self.records.thread(conversation_key(run.user_id, run.conversation_id))
        if thread is None:
            return
        caller = Caller(run.user_id, supports_elicitation=True, surface="slack")
        conversation = await self.conversations.get(caller, run.conversation_id)
        after = conversation.active_run_after if conversation.active_run_id == run.run_id else 0
        followed = await self.conversations.follow(caller, run.conversation_id, run.run_id, after)
        reply: Reply | None = None
        replies = 0
        async for _, event in followed.events:
            try:
                if isinstance(event, TextDelta):
                    if reply is None:
                        reply, replies = Reply(self.client, self.records, thread, run.run_id, replies), replies + 1
                    await reply.add(event.text)
                    continue
                if reply is not None and isinstance(event, ToolCall):
                    await reply.flush()
                if reply is not None and isinstance(event, ElicitationRequested | RunPaused | RunFinished):
                    await reply.flush()
                    reply = None  # text after a question goes below it, in a new message
                if isinstance(event, ElicitationRequested):
                    # An approval that others give shows as a wait, without buttons (`Questions.post`).
                    await self.questions.post(event.elicitation, thread)
                elif isinstance(event, ElicitationResolved):
                    await self.questions.finish(event.elicitation_id, event.outcome)
            except Exception:
                # Slack being unreachable for a moment must not stop the run being shown; the next event retries.
                log.exception("showing run %s in Slack failed", run.run_id)
