"""Conversations and their runs: who owns them, and the one run each may have going."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field, replace

from elicithub.core.broker import Broker
from elicithub.core.elicitation import new_id
from elicithub.core.errors import NotFound
from elicithub.runtime.loop import Runner
from elicithub.runtime.models import Message
from elicithub.runtime.runs import RunRecord, RunStore
from elicithub.runtime.tools import CallContext

log = logging.getLogger(__name__)


@dataclass
class Conversation:
    id: str
    user_id: str | None
    messages: list[Message] = field(default_factory=list)
    stream_id: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class ConversationNotFound(NotFound):
    def __init__(self, conversation_id: str) -> None:
        Exception.__init__(self, f"No conversation {conversation_id!r} for this user.")


class Conversations:
    def __init__(self, runner: Runner, broker: Broker, runs: RunStore | None = None, owner: str = "") -> None:
        self.runner = runner
        self.broker = broker
        self.runs = runs
        self.owner = owner
        self._items: dict[str, Conversation] = {}

    async def _find(self, conversation_id: str) -> Conversation | None:
        """This process's conversation, or one whose run was recorded (before a restart, or by another instance)."""
        conversation = self._items.get(conversation_id)
        if conversation is not None or self.runs is None:
            return conversation
        record = await self.runs.get(conversation_id)
        if record is None:
            return None
        conversation = Conversation(conversation_id, record.user_id, list(record.messages), record.stream_id)
        self._items[conversation_id] = conversation
        return conversation

    async def open(
        self, conversation_id: str | None, user_id: str | None, history: list[Message] | None = None
    ) -> Conversation:
        """The caller's conversation with this id, created when new; another user's does not exist for them."""
        if conversation_id is None:
            conversation_id = new_id("conv")
        conversation = await self._find(conversation_id)
        if conversation is None:
            conversation = Conversation(conversation_id, user_id, list(history or []))
            self._items[conversation_id] = conversation
        elif conversation.user_id != user_id:
            raise ConversationNotFound(conversation_id)
        return conversation

    async def start(self, conversation: Conversation, text: str, stream_id: str, supports_elicitation: bool) -> None:
        """Add the user's message and start a run on `stream_id` (subscribe to it first)."""
        if conversation.running and conversation.stream_id is not None:
            # The person moved on: their pending question is cancelled and the old run ends on its own stream.
            await self.broker.cancel_stream(conversation.stream_id)
            assert conversation.task is not None
            with contextlib.suppress(Exception):
                await asyncio.shield(conversation.task)
        conversation.messages.append({"role": "user", "content": text})
        conversation.stream_id = stream_id
        context = CallContext(conversation.id, stream_id, conversation.user_id, supports_elicitation)
        conversation.task = asyncio.create_task(self.runner.run(conversation.messages, context))

    async def get(self, conversation_id: str, user_id: str | None) -> Conversation:
        """The caller's existing conversation; unknown, another user's, or asked for anonymously: not found."""
        conversation = await self._find(conversation_id)
        if conversation is None or user_id is None or conversation.user_id != user_id:
            raise ConversationNotFound(conversation_id)
        return conversation

    def running_on(self, conversation_id: str, stream_id: str) -> bool:
        conversation = self._items.get(conversation_id)
        return conversation is not None and conversation.running and conversation.stream_id == stream_id

    async def recover(self) -> int:
        """Take over the unfinished runs of hub processes that are gone, and continue them; returns how many."""
        if self.runs is None:
            return 0
        taken = 0
        for record in await self.runs.unfinished(other_than=self.owner):
            if record.owner == self.owner or await self.runs.alive(record.owner):
                continue
            if not await self.runs.claim(record.conversation_id, record.owner, self.owner):
                continue  # another instance took it first
            self._resume(replace(record, owner=self.owner))
            taken += 1
        if taken:
            log.info("took over %d interrupted runs", taken)
        return taken

    def _resume(self, record: RunRecord) -> None:
        conversation = self._items.get(record.conversation_id)
        if conversation is None or conversation.running:
            conversation = Conversation(record.conversation_id, record.user_id)
            self._items[record.conversation_id] = conversation
        conversation.messages = list(record.messages)
        conversation.stream_id = record.stream_id
        context = CallContext(record.conversation_id, record.stream_id, record.user_id, record.supports_elicitation)
        conversation.task = asyncio.create_task(self.runner.run(conversation.messages, context, resume=record))

    async def close(self) -> None:
        tasks = [c.task for c in self._items.values() if c.task is not None and not c.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
