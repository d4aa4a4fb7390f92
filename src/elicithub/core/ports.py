"""What the core needs from storage: one protocol per record kind. Each backend in `store/` implements all of them."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol

from elicithub.core.elicitation import Answer, Elicitation, Outcome, State
from elicithub.core.events import StreamEvent
from elicithub.core.jsoncodec import JsonMapping, JsonObject
from elicithub.core.runs import ConversationRecord, Message, RunRecord


class EventSink(Protocol):
    """Where the broker shows a question and its end: the stream of the run that asked."""

    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None: ...


class Counts(Protocol):
    """What counts a hub's questions (its metrics): those a run of the hub waits on, and the ends the hub made, so
    that each end is counted once across the hubs sharing a store."""

    def pending(self, elicitation: Elicitation, change: int) -> None: ...

    def ended(self, elicitation: Elicitation, outcome: Outcome) -> None: ...


class ElicitationStore(Protocol):
    async def put(self, elicitation: Elicitation) -> None:
        """Save a new pending elicitation; this client hears its end (`resolutions`)."""

    async def get(self, elicitation_id: str) -> Elicitation | None: ...

    async def watch(self, elicitation_id: str) -> Elicitation | None:
        """Hear this elicitation's end from now on (`resolutions`), then read it: an end before the call shows in
        what it returns, one after it comes as a notice. For a client that did not store it (another instance did,
        or an earlier process)."""

    async def transition(
        self, elicitation_id: str, state: State, answer: Answer | None, at: datetime, read: Elicitation | None = None
    ) -> bool:
        """Move a pending elicitation to `state`; False when it was no longer pending (compare-and-set). `read`: the
        pending elicitation as the caller holds it, which a store may compare against instead of reading it (if it
        changed meanwhile, the comparison fails and the store judges against what is stored)."""

    async def due(self, now: datetime, limit: int = 500) -> list[Elicitation]:
        """Pending elicitations whose deadline has passed."""

    async def purge(self, resolved_before: datetime) -> int:
        """Forget terminal elicitations resolved before the given time."""

    def resolutions(self) -> AsyncGenerator[str | None, None]:
        """The ids of elicitations as they reach a terminal state, through any client of this store (this one too):
        at least those this client stored or watches (Redis, Postgres: only those; memory, SQLite: every one).

        The first item is None, once listening has begun; None comes again whenever listening had to start over
        (a lost connection), since ids resolved in between are not replayed: re-read what you wait for. A store
        private to one process hears only its own transitions. Close the generator to stop listening.
        """

    async def close(self) -> None: ...


class RunStore(Protocol):
    """Runs by `run_id`."""

    async def save(self, record: RunRecord) -> None:
        """Write the record; of its messages only its own (those after its conversation's `history`)."""

    async def get(self, run_id: str, *, messages: bool = True, known: Sequence[Message] = ()) -> RunRecord | None:
        """The record, its messages with its conversation's `history` read back; `messages=False`: without any
        (`messages` empty), a look at where it is that costs the same however long the conversation. `known`: the
        conversation's first messages as the caller holds them (they never change: messages are only appended);
        when they cover the run's history they are used instead of reading it."""

    async def finish(self, record: RunRecord) -> int | None:
        """Save `record` (finished) and, if its conversation's active run is still this run, commit it in the same
        step: add the run's messages after its `history` to the conversation, clear its active run and bump its
        version (its time: the record's). The conversation's version written, or None when the run was no longer
        active (it committed nothing)."""

    async def claim(self, run_id: str, expected_owner: str, owner: str) -> bool:
        """Take over a run from `expected_owner` (compare-and-set): of several claimants exactly one wins."""

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        """Runs not finished, preferably of owners other than `other_than` (the caller itself), without their
        messages (`get` reads one whole)."""

    async def purge(self, finished_before: float) -> int:
        """Forget runs that finished before this time (unix seconds)."""

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        """Say that `owner` (a hub instance) is alive for the next `ttl_s` seconds; 0: it is gone now."""

    async def alive(self, owner: str) -> bool:
        """Whether another hub instance still beats; its runs are taken over when it does not."""


@dataclass(frozen=True)
class Added:
    """What `ConversationStore.send` did: the record it replaced (None: the conversation is new) and the one it wrote,
    both without their messages (`stored` counts them)."""

    previous: ConversationRecord | None
    written: ConversationRecord


class ConversationStore(Protocol):
    """Conversations by `key` (see `core.runs.conversation_key`), written by compare-and-set on `version`; each
    conversation's messages in a list apart that only grows, so a write costs the same however long it is."""

    @property
    def ordered(self) -> bool:
        """Whether the store applies the writes and reads issued in one turn of the event loop in the order they were
        issued, so a read issued after writes in the same turn sees them (one process, one writer, or one write per
        turn); not a pool of connections, on which they race."""

    async def get(self, key: str, *, messages: bool = True) -> ConversationRecord | None:
        """The record with its messages; `messages=False`: without them (its `stored` still counts them), for those
        who need only its active run."""

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        """Write `record` (whose `version` is the new one) if the stored version is `expected_version`, and add
        its messages after the `record.stored` already kept, in the same step: a writer that loses adds none.

        `expected_version=None`: only if no conversation has this key yet. False when another writer won.
        """

    async def send(self, record: ConversationRecord) -> Added | None:
        """Add a message and make `record.active_run_id` the active run, whichever run was active, in one step (read
        and written at once, so no writer loses): `record` is the conversation as it would be new (all its messages,
        the last the one to add; its time), of which a conversation already stored gets only the last message. The
        version written is the one after the stored one, and `active_run_after` the newest seq of its event log as
        stored (0 for a new conversation). None, writing nothing, when the stored record is of an earlier form
        (messages inline): `put` it then."""

    async def purge(self, idle_before: float) -> int:
        """Forget conversations not written since this time (unix seconds) and without an active run, their
        messages and event logs with them."""


class Entry(NamedTuple):
    """One entry of a list kept by `KeyValueStore.add_entry`; entries order by `expires_ms`, then `value`."""

    expires_ms: int  # unix time in ms, by the clock of the hub that added it
    value: str


class Held(NamedTuple):
    """What `KeyValueStore.hold` did (`holding` found): whether it holds the member now, how many members the set
    holds (that one included), and when the first of them lapses (unix ms; 0 when the set is empty)."""

    taken: bool
    members: int
    first_end_ms: int


class KeyValueStore(Protocol):
    """Opaque bytes by key, each with an optional lifetime: the one port for every small record kept by key. Apart
    from those, lists of entries by key, each entry with its own lifetime, that many writers add to at once; and sets
    of members by key, each member held for a lifetime of its own, that many hubs take places in at once up to a limit.

    Its users own their key prefix and encoding: the vault (`credential:`, `client:`, `signin:`, `session:`, sealed
    before they get here), single-use tickets (`link-once:`, `mcp-round:`), A2A tasks (`a2a-task:`), MCP tasks
    (`mcp-task:`, and each user's list of them, `mcp-tasks:`), Slack's records (`slack:`), user-scoped servers' tool
    listings (`tools:`), the groups of people signed in to the widget (`signed-in-groups:`), approvals whose end is
    not yet recorded (`approval-open:`, and the list `approvals-open`), their timers (`approval-timer:`, and the list
    `approval-timers`), the approval each call got (`approval-given:`), the audit log (the list `audit`), the
    notifications waiting to go out (`outbox:`, and each channel's list `outbox:NAME`), mail links' single-use
    tickets (`email-link-once:`), the addresses people's identity providers verified (`signed-in-email:`), and the
    limits' sets of what each person holds (`limits:`).
    """

    async def put(self, key: str, value: bytes, ttl_s: float | None = None) -> None: ...

    async def get(self, key: str) -> bytes | None: ...

    async def take(self, key: str) -> bytes | None:
        """Read and delete in one step: of several takers of one key exactly one gets the value."""

    async def delete(self, key: str) -> None: ...

    async def add_entry(self, key: str, value: str, ttl_s: float) -> None:
        """Add `value` to the list under `key` (a key of lists, apart from `put`'s) for `ttl_s` from now, in one step:
        of many adds at once, to one list or several, none is lost. An entry is gone once its lifetime is over
        (expired entries are removed as the store goes on, never kept for good); adding an equal entry again keeps
        one."""

    async def entries(self, key: str, limit: int, before: Entry | None = None) -> list[Entry]:
        """The list's entries not expired, latest first (by `expires_ms`, then `value`), at most `limit`; those after
        `before` in that order, when given (the last entry of a page reads the next page, whether or not it is still
        kept)."""

    async def hold(self, key: str, member: str, ttl_s: float, limit: int | None = None) -> Held:
        """Hold `member` in the set under `key` (a key of sets, apart from `put`'s and `add_entry`'s) for `ttl_s`
        from now, unless the set holds `limit` other members already; in one step across every hub sharing the
        store, so that of many at once no more than `limit` are taken. A member held again is taken whatever the
        limit, its lifetime starting over; a member is gone once its lifetime is over."""

    async def release(self, key: str, member: str) -> None:
        """Let go of `member` (nothing happens when the set does not hold it)."""

    async def holding(self, key: str) -> Held:
        """How many members the set holds now, and when the first lapses (`taken` is False)."""


class EventLog(Protocol):
    """Bounded, numbered logs of JSON events, one per stream key (a conversation), readable from any instance.

    Sequence numbers start at 1 and grow by one per append on a key; only the last `max_len` (about) are kept.
    """

    async def append(self, key: str, event: JsonMapping) -> int:
        """Add an event; returns its sequence number once it is stored."""

    def post(self, key: str, event: JsonMapping, *, followed: bool = True) -> None:
        """Add an event without waiting for it (written behind): it is numbered and stored after every append and
        post made before it on this instance, readers see it once it is stored, and one that cannot be stored is
        logged and tried again (never dropped while the hub runs). The hot path's way to append.

        `followed`: readers here are likely to follow this log (this instance's own run writes it), so a store
        that must listen for other instances' appends may start listening along with this one."""

    async def read(self, key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        """The kept events with a sequence number above `after`, oldest first."""

    async def wait(self, key: str, after: int, timeout_s: float, limit: int = 1000) -> list[tuple[int, JsonObject]]:
        """Like `read`, but when there is nothing yet, wait up to `timeout_s` for an append (on any instance)."""

    async def last(self, key: str) -> int:
        """The sequence number of the newest event (0 when none), counting every post made here before."""


class Casts(Protocol):
    """Messages passed as they are sent to every instance sharing the store, kept nowhere: what a model turn says
    while it streams (runtime/live.py), a request to stop one, and that a person's tools changed (their `/mcp`
    sessions are told: surfaces/mcp/list_changed.py). Best effort: an instance that is not listening
    when a message is sent never gets it; what must not be lost goes to the event log instead."""

    def send(self, message: str) -> None:
        """Send without waiting; messages sent here reach each instance in the order sent. One that cannot be sent
        is logged and dropped. At most `CAST_MAX_BYTES` of UTF-8."""

    async def listen(self, handler: Callable[[str], None]) -> None:
        """From when this returns, hand `handler` each message any instance sends (this one's too), in order; after
        a lost connection listening goes on by itself (what was sent meanwhile is lost). Called once per hub."""


CAST_MAX_BYTES = 7000
"""Postgres' NOTIFY takes at most 8000 bytes of payload: every message fits, with room to spare."""


class Backend(Protocol):
    """One store URL's backend: every record kind over one connection (pool), closed together."""

    @property
    def url(self) -> str: ...

    @property
    def shared(self) -> bool:
        """Whether several hub processes may use it at once (Redis, Postgres); memory and SQLite serve one process."""

    @property
    def durable(self) -> bool:
        """Whether records outlive the process (SQLite, Redis, Postgres)."""

    @property
    def elicitations(self) -> ElicitationStore: ...

    @property
    def runs(self) -> RunStore: ...

    @property
    def conversations(self) -> ConversationStore: ...

    @property
    def kv(self) -> KeyValueStore: ...

    @property
    def events(self) -> EventLog: ...

    @property
    def casts(self) -> Casts:
        """Messages to the other instances (a backend that serves one process: sent to nobody)."""

    async def ready(self) -> str | None:
        """None when the store answers and its schema is the one this hub knows; else why not (for `/readyz`)."""

    async def open(self) -> None:
        """Connect and check that this hub may use the store (its schema, its settings), before serving; raises
        StoreUnusable saying why not. Record kinds used without it connect on first use."""

    async def close(self) -> None: ...
