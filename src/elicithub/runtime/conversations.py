"""Conversations and their runs: who owns them, and the one run each may have going."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from elicithub.core.broker import Broker
from elicithub.core.elicitation import new_id
from elicithub.core.errors import NotFound
from elicithub.runtime.loop import Runner
from elicithub.runtime.models import Message
from elicithub.runtime.tools import CallContext


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
    def __init__(self, runner: Runner, broker: Broker) -> None:
        self.runner = runner
        self.broker = broker
        self._items: dict[str, Conversation] = {}

    def open(
        self, conversation_id: str | None, user_id: str | None, history: list[Message] | None = None
    ) -> Conversation:
        """The caller's conversation with this id, created when new; another user's does not exist for them."""
        if conversation_id is None:
            conversation_id = new_id("conv")
        conversation = self._items.get(conversation_id)
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

    def get(self, conversation_id: str, user_id: str | None) -> Conversation:
        """The caller's existing conversation; unknown, another user's, or asked for anonymously: not found."""
        conversation = self._items.get(conversation_id)
        if conversation is None or user_id is None or conversation.user_id != user_id:
            raise ConversationNotFound(conversation_id)
        return conversation

    def running_on(self, conversation_id: str, stream_id: str) -> bool:
        conversation = self._items.get(conversation_id)
        return conversation is not None and conversation.running and conversation.stream_id == stream_id

    async def close(self) -> None:
        tasks = [c.task for c in self._items.values() if c.task is not None and not c.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
