"""One run shown in its Teams conversation: each model turn's text a message that grows as the model streams it
(Teams' streaming in a 1:1 chat; elsewhere posted with its first words, then updated in place), questions as cards,
and their ends."""

from __future__ import annotations

import logging

from microsoft_teams.apps.http_stream import HttpStream

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
from elicithub.surfaces.teams.connector import Connector, text_message
from elicithub.surfaces.teams.questions import Questions
from elicithub.surfaces.teams.records import Chat, TeamsRecords

log = logging.getLogger(__name__)

UPDATE_INTERVAL_S = 1.0
"""A growing reply is sent at most this often (Teams takes about one update a second per message)."""

_MESSAGE_MAX = 28_000  # Teams refuses a message past about 28 KB

_ENDS_A_REPLY = (StepStarted, ToolCall, ElicitationRequested, RunPaused, RunFinished)
"""What comes after a reply's last text: a new model turn (its text is a new message), a tool call, a question
(text after it goes below it), the run's end."""


class Reply:
    """One stretch of the bot's text, sent as it grows (at most once per `UPDATE_INTERVAL_S`) and once more, if it
    has grown since, when it is complete: streamed in a 1:1 chat (typing updates, then the final message), else
    posted and updated in place. A run shown again (after a restart) updates the message it posted before."""

    def __init__(self, connector: Connector, records: TeamsRecords, chat: Chat, run_id: str, index: int) -> None:
        self.connector = connector
        self.records = records
        self.chat = chat
        self.key = (run_id, index)
        self.text = ""
        self.shown = ""
        self.activity_id: str | None = None
        self.stream: HttpStream | None = None
        self.pacer = Pacer(self._show, UPDATE_INTERVAL_S)

    def add(self, text: str) -> None:
        self.text += text
        self.pacer.more()

    async def end(self) -> None:
        """The stretch is complete: all of it is shown, after any send under way."""
        await self.pacer.stop()
        if self.text != self.shown:
            await self._show()
        if self.stream is not None:
            final = await self.stream.close()
            if final is not None:
                await self.records.save_reply(*self.key, final.id)

    def cancel(self) -> None:
        self.pacer.cancel()

    async def _show(self) -> None:
        text = self.text[:_MESSAGE_MAX]
        if self.stream is None and self.activity_id is None:
            self.activity_id = await self.records.reply(*self.key)
            if self.activity_id is None and self.chat.personal:
                self.stream = self.connector.stream(self.chat)
        if self.stream is not None:
            self.stream.emit(text[len(self.shown) :])  # the stream sends all it got so far, once a flush is due
        elif self.activity_id is None:
            self.activity_id = await self.connector.post(self._place, text_message(text))
            await self.records.save_reply(*self.key, self.activity_id)
        else:
            await self.connector.update(self._place, self.activity_id, text_message(text))
        self.shown = text

    @property
    def _place(self) -> tuple[str, str]:
        return self.chat.service_url, self.chat.conversation_id


class ChatWriter:
    """Shows runs of Teams conversations in them; each run is shown by the hub that runs it."""

    def __init__(
        self, connector: Connector, records: TeamsRecords, conversations: Conversations, questions: Questions
    ) -> None:
        self.connector = connector
        self.records = records
        self.conversations = conversations
        self.questions = questions

    async def show(self, run: RunRecord) -> None:
        """Follow the run from its start to its end and show it; a run of no Teams conversation is left alone."""
        try:
            await self._show(run)
        except Exception:
            log.exception("showing run %s in Teams stopped", run.run_id)

    async def _show(self, run: RunRecord) -> None:
        if run.user_id is None:
            return
        chat = await self.records.chat(conversation_key(run.user_id, run.conversation_id))
        if chat is None:
            return
        caller = Caller(run.user_id, supports_elicitation=True, surface="teams")
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
                            reply = Reply(self.connector, self.records, chat, run.run_id, replies)
                            replies += 1
                        reply.add(event.text)
                        continue
                    if reply is not None and isinstance(event, _ENDS_A_REPLY):
                        await reply.end()
                        reply = None
                    if isinstance(event, ElicitationRequested):
                        await self.questions.post(event.elicitation, chat)
                    elif isinstance(event, ElicitationResolved):
                        await self.questions.finish(event.elicitation_id, event.outcome)
                except Exception:
                    # Teams being unreachable for a moment must not stop the run being shown; the next event retries.
                    log.exception("showing run %s in Teams failed", run.run_id)
        finally:
            if reply is not None:
                reply.cancel()
