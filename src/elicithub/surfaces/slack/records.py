"""What the Slack surface remembers, in the hub's store: each conversation's thread, each question's message, and
the direct messages that ask approvers to answer an approval.

Kept in the store (not in memory) so that whichever instance gets a button press, and a hub after a restart,
finds the message to answer from and to update.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from elicithub.core.ports import KeyValueStore

MOST_DMS = 1000
"""How many direct messages of one approval are read back (its approvers with a Slack account)."""


@dataclass(frozen=True)
class Thread:
    """Where a conversation lives in Slack, and who wrote in it last (their questions reach them)."""

    team: str
    channel: str
    thread_ts: str
    slack_user: str


@dataclass(frozen=True)
class PostedQuestion:
    """A question's message in a thread: enough to check who may answer it and to show how it ended."""

    elicitation_id: str
    channel: str
    ts: str
    thread_ts: str
    slack_user: str  # the only Slack user who may press its buttons
    user_id: str  # the hub user it was asked of
    mode: str
    message: str
    server: str = ""  # the service a sign-in is for, as people know it
    outcome: str | None = None  # set once the message shows the end


@dataclass(frozen=True)
class DirectMessage:
    """An approval's direct message to one approver: enough to remind them in its thread and to show its end."""

    slack_user: str
    channel: str
    ts: str


def conversation_for(team: str, channel: str, thread_ts: str) -> str:
    """One conversation per Slack thread, as a hub conversation id (1-128 of A-Z a-z 0-9 . _ ~ -)."""
    return re.sub(r"[^A-Za-z0-9._~-]", "_", f"slack-{team}-{channel}-{thread_ts}")[:128]


class SlackRecords:
    """Records as JSON in the store's key-value entries (on every backend), kept `ttl_s` seconds."""

    def __init__(self, store: KeyValueStore, ttl_s: float) -> None:
        self.store = store
        self.ttl_s = ttl_s

    async def _get(self, key: str) -> dict[str, Any] | None:
        raw = await self.store.get(f"slack:{key}")
        return None if raw is None else dict(json.loads(raw))

    async def _put(self, key: str, value: dict[str, Any]) -> None:
        await self.store.put(f"slack:{key}", json.dumps(value).encode(), self.ttl_s)

    async def thread(self, conversation_key: str) -> Thread | None:
        data = await self._get(f"thread:{conversation_key}")
        return None if data is None else Thread(**data)

    async def save_thread(self, conversation_key: str, thread: Thread) -> None:
        await self._put(f"thread:{conversation_key}", asdict(thread))

    async def question(self, elicitation_id: str) -> PostedQuestion | None:
        data = await self._get(f"question:{elicitation_id}")
        return None if data is None else PostedQuestion(**data)

    async def save_question(self, question: PostedQuestion) -> None:
        await self._put(f"question:{question.elicitation_id}", asdict(question))

    async def add_dm(self, elicitation_id: str, dm: DirectMessage, keep_s: float) -> None:
        """Keep a direct message of an approval `keep_s` seconds past the store's usual lifetime (an approval may
        wait longer than a question); a list, so hubs that send at once lose none."""
        await self.store.add_entry(f"slack:dms:{elicitation_id}", json.dumps(asdict(dm)), keep_s + self.ttl_s)

    async def dms(self, elicitation_id: str) -> list[DirectMessage]:
        """The approval's direct messages (in no particular order)."""
        entries = await self.store.entries(f"slack:dms:{elicitation_id}", MOST_DMS)
        return [DirectMessage(**json.loads(e.value)) for e in reversed(entries)]

    async def reply(self, run_id: str, index: int) -> str | None:
        """The ts of a run's `index`-th reply message, once posted (a replayed run edits it, never posts twice)."""
        data = await self._get(f"reply:{run_id}:{index}")
        return None if data is None else str(data["ts"])

    async def save_reply(self, run_id: str, index: int, ts: str) -> None:
        await self._put(f"reply:{run_id}:{index}", {"ts": ts})

    async def first_delivery(self, event_id: str) -> bool:
        """Whether an event is new: Slack delivers an event again when it thinks the first delivery failed."""
        if await self._get(f"event:{event_id}") is not None:
            return False
        await self._put(f"event:{event_id}", {})
        return True
