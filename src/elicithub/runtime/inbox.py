"""The inbox: the open questions a person can answer (their own runs' and the approvals routed to them) as items, and
the feed of their comings and goings, readable from any hub.

Every question shown and every end goes on one event log every hub shares (`inbox`), with who may answer it; each
reader follows that log and keeps what is theirs. So a question asked on one hub reaches a reader on another, its
end (an answer on any hub, its deadline, a cancel) reaches everyone who had it, and an escalation reaches those it
escalates to. A reader's position is the log's sequence number (the SSE id): a reader that comes back with it gets
what it missed, as long as the log still keeps what followed (its last `conversations.max_events` events); else it
starts over as a new reader does, with `inbox-reset` and the whole list.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NotRequired, TypedDict

from elicithub.core.approval import Approval, ApprovalJson, People
from elicithub.core.elicitation import Elicitation, ElicitationJson, Mode, Outcome, QuestionContext, State, utcnow
from elicithub.core.events import ElicitationRequested, ElicitationResolved, StreamEvent
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import ElicitationStore, EventLog, EventSink

KEY = "inbox"
"""The shared log's key (a conversation's key has a `~/` or `u:` prefix, so none is this)."""

WAIT_S = 30.0
"""How long one read of the log blocks before it is made again (the response's keep-alives go on meanwhile)."""

Snapshot = Callable[[], Awaitable[list[Elicitation]]]
"""The person's open questions now, newest first (`Answerable.questions`)."""


class Item(TypedDict):
    """An open question as the inbox lists it (`GET /run/api/inbox`, and in `inbox-added`): `conversationId` only
    for the reader's own run's; a form question has `requestedSchema`, a url one `url`."""

    elicitationId: str
    conversationId: NotRequired[str]
    message: str
    mode: Mode
    requestedSchema: NotRequired[JsonObject | None]
    url: NotRequired[str | None]
    context: QuestionContext
    createdAt: str
    expiresAt: str


class ResetEvent(TypedDict):
    """The reader starts over: every open question follows as `inbox-added`."""

    type: Literal["inbox-reset"]


class AddedEvent(Item):
    type: Literal["inbox-added"]


class RemovedEvent(TypedDict):
    type: Literal["inbox-removed"]
    elicitationId: str
    outcome: Outcome
    answeredBy: NotRequired[str]


InboxEvent = ResetEvent | AddedEvent | RemovedEvent
"""What the inbox's stream (`GET /run/api/inbox/stream`) carries."""


class AddedEntry(TypedDict):
    """A question shown on its run's stream (`added`), or escalated to more people (`escalated`), on the shared log."""

    kind: Literal["added", "escalated"]
    at: str
    elicitation: ElicitationJson


class RemovedEntry(TypedDict):
    """A question's end on the shared log, with who could answer it (its `owner` and `approval`)."""

    kind: Literal["removed"]
    at: str
    id: str
    owner: str
    approval: ApprovalJson | None
    outcome: Outcome
    answeredBy: str | None


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def answers(owner: str, approval: Approval | None, user_id: str, groups: Collection[str], at: datetime) -> bool:
    """Whether `user_id` may answer a question of `owner`'s at `at`: their own (an approval routed to others aside),
    or an approval routed to them."""
    if approval is None:
        return owner == user_id
    return approval.standing(user_id, groups, owner, at) == "answers"


# An item's optional keys apart, unpacked where the JSON has always had them (mypy checks the whole item).


class _Whose(TypedDict, total=False):
    conversationId: str


class _Asks(TypedDict, total=False):
    requestedSchema: JsonObject | None
    url: str | None


def item(elicitation: Elicitation, user_id: str) -> Item:
    """An open question as the inbox lists it to `user_id`; the conversation only when it is their own run's."""
    whose: _Whose = {"conversationId": elicitation.conversation_id} if elicitation.user_id == user_id else {}
    asks: _Asks = (
        {"requestedSchema": elicitation.requested_schema} if elicitation.mode == "form" else {"url": elicitation.url}
    )
    return {
        "elicitationId": elicitation.id,
        **whose,
        "message": elicitation.message,
        "mode": elicitation.mode,
        **asks,
        "context": elicitation.context,
        "createdAt": _stamp(elicitation.created_at),
        "expiresAt": _stamp(elicitation.expires_at),
    }


class Inbox:
    """Writes the shared log (as the broker's sink hears questions and ends, and as approvals escalate) and follows it
    for one person."""

    def __init__(self, log: EventLog, store: ElicitationStore) -> None:
        self.log = log
        self.store = store

    def heard(self, elicitation: Elicitation, event: StreamEvent) -> None:
        """A question shown on its run's stream, or its end (either may be told more than once: readers take an
        item once, and an end of one they do not have changes nothing)."""
        at = utcnow().isoformat()
        if isinstance(event, ElicitationRequested):
            added: AddedEntry = {"kind": "added", "at": at, "elicitation": elicitation.to_json()}
            self.log.post(KEY, added, followed=False)
        elif isinstance(event, ElicitationResolved):
            removed: RemovedEntry = {
                "kind": "removed",
                "at": at,
                "id": elicitation.id,
                "owner": elicitation.user_id,
                "approval": None if elicitation.approval is None else elicitation.approval.to_json(),
                "outcome": event.outcome,
                "answeredBy": event.answered_by,
            }
            self.log.post(KEY, removed, followed=False)

    # The approval listener's notices (runtime/approvers.py): only an escalation adds people who may answer.

    async def added(self, elicitation: Elicitation, to: People) -> None:
        """Told by `heard`, as the question shows on its run's stream."""

    async def reminded(self, elicitation: Elicitation, to: People) -> None:
        """Nothing changes in anyone's inbox."""

    async def escalated(self, elicitation: Elicitation, to: People) -> None:
        entry: AddedEntry = {"kind": "escalated", "at": utcnow().isoformat(), "elicitation": elicitation.to_json()}
        self.log.post(KEY, entry, followed=False)

    async def ended(self, elicitation: Elicitation) -> None:
        """Told by `heard`, as its end shows on its run's stream."""

    async def follow(
        self, user_id: str, groups: Collection[str], last_event_id: str | None, snapshot: Snapshot
    ) -> AsyncIterator[tuple[int | None, InboxEvent]]:
        """The person's inbox events as they come, each with its position (None: not one to resume after): after
        `last_event_id` when the log still keeps what followed it, else `inbox-reset` and every open question
        (`snapshot`) as `inbox-added`, the last of them carrying the position they are as of."""
        reader = _Reader(user_id, frozenset(groups))
        after = _position(last_event_id)
        if after is None or not await self._resumable(after):
            after = await self.log.last(KEY)  # before the snapshot: what changes after it comes after this
            found = await snapshot()
            first: list[InboxEvent] = [{"type": "inbox-reset"}]
            first += [{"type": "inbox-added", **item(e, user_id)} for e in reversed(found)]
            reader.shown.update(e.id for e in found)
            for n, shown in enumerate(first, 1):
                yield (after if n == len(first) else None), shown
        while True:
            for seq, entry in await self.log.wait(KEY, after, WAIT_S):
                after = seq
                event = await self._event(reader, entry)
                if event is not None:
                    yield seq, event

    async def _resumable(self, after: int) -> bool:
        """Whether the log keeps every entry after `after` (it holds no gap there, and was not started anew)."""
        if after > await self.log.last(KEY):
            return False
        found = await self.log.read(KEY, after, limit=1)
        return not found or found[0][0] == after + 1

    async def _event(self, reader: _Reader, entry: JsonObject) -> InboxEvent | None:
        """The event an entry of the log (`AddedEntry` or `RemovedEntry`, as any version wrote it) is for the reader,
        if any."""
        kind = entry.get("kind")
        if kind not in ("added", "escalated", "removed"):
            return None  # a kind of a later version
        at = datetime.fromisoformat(entry["at"])
        if kind == "removed":
            approval = entry.get("approval")
            known = None if approval is None else Approval.from_json(approval)
            if entry["id"] in reader.removed or not reader.answers(entry["owner"], known, at):
                return None
            reader.removed.add(entry["id"])
            removed: RemovedEvent = {"type": "inbox-removed", "elicitationId": entry["id"], "outcome": entry["outcome"]}
            if entry.get("answeredBy"):
                removed["answeredBy"] = entry["answeredBy"]
            return removed
        elicitation = Elicitation.from_json(entry["elicitation"])
        if elicitation.id in reader.shown or elicitation.id in reader.removed:
            return None
        if not reader.answers(elicitation.user_id, elicitation.approval, at):
            return None
        approval = elicitation.approval
        if kind == "escalated" and approval is not None and approval.approvers is not None:
            if approval.approvers.include(reader.user_id, reader.groups):
                return None  # an approver already: it is in their inbox
        # Shown only while it is open: an end stored before this read is on the log before this entry was read (the
        # reader has it, or had it before it started), one stored after it comes after.
        stored = await self.store.get(elicitation.id)
        if stored is None or stored.state is not State.PENDING:
            return None
        reader.shown.add(elicitation.id)
        return {"type": "inbox-added", **item(elicitation, reader.user_id)}


@dataclass
class _Reader:
    """One person following the log, and the questions this reading gave them and took away (each is told once)."""

    user_id: str
    groups: frozenset[str]
    shown: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)

    def answers(self, owner: str, approval: Approval | None, at: datetime) -> bool:
        return answers(owner, approval, self.user_id, self.groups, at)


_MAX_DIGITS = 18
"""Every position the log writes fits a signed 64-bit integer; a longer one is not ours."""


def _position(last_event_id: str | None) -> int | None:
    if not last_event_id or not (last_event_id.isascii() and last_event_id.isdigit()):
        return None
    return int(last_event_id) if len(last_event_id) <= _MAX_DIGITS else None


Heard = Callable[[Elicitation, StreamEvent], None]
"""Told of a question shown on its run's stream, or of its end, on the hub where the run goes on (perhaps more than
once); it must not make the run wait."""


class InboxSink:
    """The broker's sink: a question and its end go to its run's stream, to the inbox, and to those that `hear` them
    (a surface that reaches people where they are)."""

    def __init__(self, stream: EventSink, inbox: Inbox) -> None:
        self.stream = stream
        self.inbox = inbox
        self._hearers: list[Heard] = []

    def hear(self, hearer: Heard) -> None:
        self._hearers.append(hearer)

    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
        await self.stream.publish(elicitation, event)
        self.inbox.heard(elicitation, event)
        for hearer in self._hearers:
            hearer(elicitation, event)
