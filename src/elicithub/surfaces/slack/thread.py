"""One run shown in its Slack thread: each model turn's text a message that grows as the model streams it (posted
with its first words, then edited), questions, and their ends."""

from __future__ import annotations

import logging

from slack_sdk.web.async_client import AsyncWebClient

from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    RunFinished,
    RunPaused,
    StepStarted,
    TextDelta,
)
from elicithub.core.runs import RunRecord, ToolCall, conversation_key
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.surfaces.pacing import Pacer
from elicithub.surfaces.slack.questions import Questions
from elicithub.surfaces.slack.records import SlackRecords, Thread
from elicithub.surfaces.slack.text import escape

log = logging.getLogger(__name__)

UPDATE_INTERVAL_S = 1.0
"""A growing reply is edited at most this often (Slack rate-limits chat.update to about one a second per message)."""

_MESSAGE_MAX = 39_000  # Slack cuts text at 40,000 characters

_ENDS_A_REPLY = (StepStarted, ToolCall, ElicitationRequested, RunPaused, RunFinished)
"""What comes after a reply's last text: a new model turn (its text is a new message), a tool call, a question
(text after it goes below it), the run's end."""


class Reply:
    """One stretch of the bot's text: posted with its first text, edited as it grows (at most once per
    `interval_s`), and edited once more, if it has grown since, when it is complete."""

    def __init__(
        self,
        client: AsyncWebClient,
        records: SlackRecords,
        thread: Thread,
        run_id: str,
        index: int,
        interval_s: float | None = None,
    ) -> None:
        self.client = client
        self.records = records
        self.thread = thread
        self.key = (run_id, index)
        self.text = ""
        self.ts: str | None = None
        self.shown = ""
        self.pacer = Pacer(self._show, UPDATE_INTERVAL_S if interval_s is None else interval_s)

    def add(self, text: str) -> None:
        self.text += text
        self.pacer.more()

    async def end(self) -> None:
        """The stretch is complete: all of it is shown, after any edit under way."""
        await self.pacer.stop()
        if self.text != self.shown:
            await self._show()

    def cancel(self) -> None:
        self.pacer.cancel()

    async def _show(self) -> None:
        text = self.text
        shown = escape(text)[:_MESSAGE_MAX] or " "
        if self.ts is None:
            # A run shown again (after a restart) edits the messages it posted before instead of posting twice.
            self.ts = await self.records.reply(*self.key)
        if self.ts is None:
            posted = await self.client.chat_postMessage(
                channel=self.thread.channel, thread_ts=self.thread.thread_ts, text=shown
            )
            self.ts = str(posted["ts"])
            await self.records.save_reply(*self.key, self.ts)
        else:
            await self.client.chat_update(channel=self.thread.channel, ts=self.ts, text=shown)
        self.shown = text


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
        try:
            async for _, event in followed.events:
                try:
                    if isinstance(event, TextDelta):
                        if reply is None:
                            reply = Reply(self.client, self.records, thread, run.run_id, replies)
                            replies += 1
                        reply.add(event.text)
                        continue
                    if reply is not None and isinstance(event, _ENDS_A_REPLY):
                        await reply.end()
                        reply = None
                    if isinstance(event, ElicitationRequested):
                        # An approval that others give shows as a wait, without buttons (`Questions.post`).
                        await self.questions.post(event.elicitation, thread)
                    elif isinstance(event, ElicitationResolved):
                        await self.questions.finish(event.elicitation_id, event.outcome)
                except Exception:
                    # Slack being unreachable for a moment must not stop the run being shown; the next event retries.
                    log.exception("showing run %s in Slack failed", run.run_id)
        finally:
            if reply is not None:
                reply.cancel()
