"""What the Teams surface remembers, in the hub's store: each conversation's chat in Teams, each question's card, the
cards that ask approvers, the replies posted, and who each mapped person is in Teams.

Kept in the store (not in memory) so that whichever hub gets a card's press, and a hub after a restart, finds the card
to answer from and to update.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from elicithub.core.ports import KeyValueStore

MOST_CARDS = 1000
"""How many approval cards of one approval are read back (its approvers with a Teams account)."""


@dataclass(frozen=True)
class Chat:
    """Where a hub conversation lives in Teams (a 1:1 chat, or a channel or group chat thread), and who wrote in it
    last (their questions reach them)."""

    service_url: str
    conversation_id: str  # Teams' own: a channel thread's ends with `;messageid=` and its first post's id
    personal: bool  # a 1:1 chat with the bot, which only its person sees
    bot_id: str
    teams_user: str  # the writer's Teams id (`29:...`)
    object_id: str  # the writer's Entra object id, which `teams.users` maps
    name: str
    reply_to: str  # the activity they wrote last: Teams' streaming replies to it


@dataclass(frozen=True)
class PostedQuestion:
    """A question's card in a conversation: enough to check who may answer it and to show how it ended."""

    elicitation_id: str
    service_url: str
    conversation_id: str
    activity_id: str
    object_id: str  # the only Teams user who may press its buttons
    name: str
    user_id: str  # the hub user it was asked of
    mode: str  # form, url, or approval (one others answer: the card only says the call waits)
    message: str
    server: str = ""  # the service a sign-in is for, as people know it
    personal: bool = False  # in a 1:1 chat, which only its person sees
    outcome: str | None = None  # set once the card shows the end


@dataclass(frozen=True)
class ApprovalCard:
    """An approval's card in one approver's 1:1 chat: enough to remind them there and to show its end."""

    object_id: str
    service_url: str
    conversation_id: str
    activity_id: str


@dataclass(frozen=True)
class Person:
    """A mapped person as Teams last showed them: where a chat with them is opened."""

    teams_user: str
    name: str
    service_url: str


def conversation_for(conversation_id: str) -> str:
    """One hub conversation per Teams conversation (a 1:1 chat, or a channel thread): Teams' ids are long and carry
    any character, so the hub's id is a digest of it."""
    return "teams-" + hashlib.sha256(conversation_id.encode()).hexdigest()[:40]


class TeamsRecords:
    """Records as JSON in the store's key-value entries (on every backend), kept `ttl_s` seconds."""

    def __init__(self, store: KeyValueStore, ttl_s: float) -> None:
        self.store = store
        self.ttl_s = ttl_s

    async def _get(self, key: str) -> dict[str, Any] | None:
        raw = await self.store.get(f"teams:{key}")
        return None if raw is None else dict(json.loads(raw))

    async def _put(self, key: str, value: dict[str, Any]) -> None:
        await self.store.put(f"teams:{key}", json.dumps(value).encode(), self.ttl_s)

    async def chat(self, conversation_key: str) -> Chat | None:
        data = await self._get(f"chat:{conversation_key}")
        return None if data is None else Chat(**data)

    async def save_chat(self, conversation_key: str, chat: Chat) -> None:
        await self._put(f"chat:{conversation_key}", asdict(chat))

    async def question(self, elicitation_id: str) -> PostedQuestion | None:
        data = await self._get(f"question:{elicitation_id}")
        return None if data is None else PostedQuestion(**data)

    async def save_question(self, question: PostedQuestion) -> None:
        await self._put(f"question:{question.elicitation_id}", asdict(question))

    async def add_card(self, elicitation_id: str, card: ApprovalCard, keep_s: float) -> None:
        """Keep an approval's card `keep_s` seconds past the store's usual lifetime (an approval may wait longer than
        a question); a list, so hubs that send at once lose none."""
        await self.store.add_entry(f"teams:cards:{elicitation_id}", json.dumps(asdict(card)), keep_s + self.ttl_s)

    async def cards(self, elicitation_id: str) -> list[ApprovalCard]:
        entries = await self.store.entries(f"teams:cards:{elicitation_id}", MOST_CARDS)
        return [ApprovalCard(**json.loads(e.value)) for e in reversed(entries)]

    async def reply(self, run_id: str, index: int) -> str | None:
        """The activity id of a run's `index`-th reply, once posted (a replayed run updates it, never posts twice)."""
        data = await self._get(f"reply:{run_id}:{index}")
        return None if data is None else str(data["id"])

    async def save_reply(self, run_id: str, index: int, activity_id: str) -> None:
        await self._put(f"reply:{run_id}:{index}", {"id": activity_id})

    async def person(self, object_id: str) -> Person | None:
        data = await self._get(f"person:{object_id}")
        return None if data is None else Person(**data)

    async def save_person(self, object_id: str, person: Person) -> None:
        await self._put(f"person:{object_id}", asdict(person))

    async def first_delivery(self, activity_id: str) -> bool:
        """Whether an activity is new: the Bot Framework sends one again when the first delivery seemed to fail."""
        if await self._get(f"activity:{activity_id}") is not None:
            return False
        await self._put(f"activity:{activity_id}", {})
        return True
