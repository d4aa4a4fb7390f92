"""A conversation's event log as runs write it and readers follow it, from any instance."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

from elicithub.core.elicitation import Elicitation
from elicithub.core.events import (
    ElicitationResolved,
    Logged,
    ModelSaid,
    ReasoningDelta,
    RunFinished,
    StepStarted,
    StreamEvent,
    TextDelta,
    ToolInputDelta,
    event_of,
)
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import EventLog
from elicithub.core.runs import conversation_key
from elicithub.runtime.live import LiveTurns, Piece
from elicithub.store.casts import LocalCasts

WAIT_S = 30.0
"""How long one read of the log blocks before it is made again (a reader's keep-alives go on meanwhile)."""


class RunStream:
    """Writes each run's events to its conversation's log, tagged with the run, and follows one run's events."""

    def __init__(self, log: EventLog, live: LiveTurns | None = None) -> None:
        self.log = log
        self.live = live if live is not None else LiveTurns(LocalCasts(), None, "", shared=False)

    async def emit(self, key: str, run_id: str, event: StreamEvent) -> None:
        """Written behind: the run goes on at once. What it stored before emitting (a pause, a question) is stored
        before any reader can see the event."""
        self.post(key, run_id, event)

    async def append(self, key: str, run_id: str, event: StreamEvent) -> None:
        """Written before this returns (after what was posted before it)."""
        await self.log.append(key, Logged(run_id, event))

    def post(self, key: str, run_id: str, event: StreamEvent) -> None:
        """`emit`, from outside a coroutine."""
        self.log.post(key, Logged(run_id, event))

    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
        """The broker's sink: a question and its end go to the stream of the run that asked. The instance that
        publishes may not be the one running it (it took the answer), so its readers are not assumed to follow."""
        key = conversation_key(elicitation.user_id, elicitation.conversation_id)
        self.log.post(key, Logged(elicitation.run_id, event), followed=False)

    async def holds(self, key: str, run_id: str, after: int) -> bool:
        """Whether the log still keeps what followed position `after`, and some of it is `run_id`'s: a run that
        has ended since can be replayed from there. A log trimmed past `after` holds a gap, not the rest."""
        while found := await self.log.read(key, after):
            if found[0][0] != after + 1:
                return False
            if any(data.get("run") == run_id for _, data in found):
                return True
            after = found[-1][0]
        return False

    async def before_end(self, key: str, run_id: str, elicitation_id: str) -> int | None:
        """The position just before `run_id`'s announcement that `elicitation_id` ended, for a reader to follow the
        run from there again (an answer repeated after its run finished); None when the log no longer keeps it."""
        after = 0
        while found := await self.log.read(key, after):
            for seq, data in found:
                if data.get("run") == run_id:
                    event = event_of(data)
                    if isinstance(event, ElicitationResolved) and event.elicitation_id == elicitation_id:
                        return seq - 1
            after = found[-1][0]
        return None

    async def follow(
        self, key: str, run_id: str, after: int, read: tuple[int, int] = (0, 0)
    ) -> AsyncIterator[tuple[int, StreamEvent]]:
        """The run's events after position `after`, as they come, up to and including its RunFinished; a model
        turn's text piece by piece as it streams, each numbered with a `LivePosition` (the position before it, and
        how much of the turn the reader has with it). `read`: how many characters of text and of thinking of the
        turn that streamed at `after` the reader already has (from a `LivePosition`); it gets the rest.

        An end of a question can be announced twice (by the instance that took the answer and by the one whose
        run waited); readers get the first.
        """
        announced: set[str] = set()
        turns = _Turns(run_id, read)
        with self.live.subscribe(key) as pieces:
            # Subscribed first: what streams from now on comes on the queue, what streamed before is in the snapshot.
            turns.hold(await self.live.snapshot(key, run_id))
            waiting: asyncio.Future[list[tuple[int, JsonObject]]] | None = None
            getting: asyncio.Future[Piece] | None = None
            try:
                caught_up = False
                while True:
                    if not caught_up:
                        found = await self.log.read(key, after)
                        if not found:
                            caught_up = True
                            for event, have in turns.caught_up():
                                yield LivePosition(after, *have), event
                            continue
                    else:
                        if waiting is None:
                            waiting = asyncio.ensure_future(self.log.wait(key, after, WAIT_S))
                        if getting is None:
                            getting = asyncio.ensure_future(pieces.get())
                        await asyncio.wait((waiting, getting), return_when=asyncio.FIRST_COMPLETED)
                        if getting.done():
                            got = [getting.result()]
                            getting = None
                            while not pieces.empty():
                                got.append(pieces.get_nowait())
                            if turns.unknown(got):
                                # A turn's start is on the log before its first piece streams: read up to it.
                                for seq, event in await self._events(key, run_id, after, announced, turns):
                                    after = seq
                                    yield seq, event
                                    if isinstance(event, RunFinished):
                                        return
                            for event, have in turns.pieces(got):
                                yield LivePosition(after, *have), event
                            continue
                        found = waiting.result()
                        waiting = None
                    for seq, event in self._own(found, after, run_id, announced, turns):
                        after = seq
                        yield seq, event
                        if isinstance(event, RunFinished):
                            return
                    if found:
                        after = max(after, found[-1][0])
            finally:
                for future in (waiting, getting):
                    if future is not None:
                        future.cancel()

    async def _events(
        self, key: str, run_id: str, after: int, announced: set[str], turns: _Turns
    ) -> list[tuple[int, StreamEvent]]:
        return list(self._own(await self.log.read(key, after), after, run_id, announced, turns))

    @staticmethod
    def _own(
        found: list[tuple[int, JsonObject]], after: int, run_id: str, announced: set[str], turns: _Turns
    ) -> Iterator[tuple[int, StreamEvent]]:
        """The run's events among `found` past `after`, as its readers get them."""
        for seq, data in found:
            if seq <= after or data.get("run") != run_id:
                continue
            event = event_of(data)
            if event is None:
                continue
            if isinstance(event, ElicitationResolved):
                if event.elicitation_id in announced:
                    continue
                announced.add(event.elicitation_id)
            for shown in turns.logged(event):
                yield seq, shown


class LivePosition(int):
    """Where a reader is inside a model turn that streams: the log's position before the turn's pieces, and how many
    characters of its text and of its thinking the reader has had (the SSE id `RUN:SEQ:TEXT.THINKING`, so that a
    reader back with it gets the rest of the turn, not all of it again)."""

    text: int
    reasoning: int

    def __new__(cls, seq: int, text: int = 0, reasoning: int = 0) -> LivePosition:
        position = super().__new__(cls, seq)
        position.text, position.reasoning = text, reasoning
        return position


Shown = list[tuple[StreamEvent, tuple[int, int]]]
"""Events a turn's pieces show, each with how much of its text and thinking the reader has then."""


class _Turns:
    """One reader's view of a run's model turns: which have started (on the log) and ended, how much of each it
    has read, and the pieces it holds until it has read their turn's start. `read`: what it has of the first turn
    whose start it does not read (it began reading inside that turn)."""

    def __init__(self, run_id: str, read: tuple[int, int] = (0, 0)) -> None:
        self.run_id = run_id
        self._started: set[str] = set()
        self._ended: set[str] = set()
        self._read: dict[tuple[str, str], int] = {}
        self._held: list[Piece] = []
        self._caught_up = False
        self._had: tuple[int, int] | None = read if read != (0, 0) else None

    def _join(self, turn: str) -> None:
        """The reader meets `turn` without having read its start: it began reading inside it."""
        if self._had is not None:
            self._read[turn, "text"], self._read[turn, "reasoning"] = self._had
            self._had = None

    def _have(self, turn: str) -> tuple[int, int]:
        return self._read.get((turn, "text"), 0), self._read.get((turn, "reasoning"), 0)

    def hold(self, pieces: list[Piece]) -> None:
        self._held.extend(pieces)

    def unknown(self, pieces: list[Piece]) -> bool:
        """Whether a piece of this run belongs to a turn whose start this reader has not read."""
        return any(p.run_id == self.run_id and p.turn not in self._started | self._ended for p in pieces)

    def caught_up(self) -> Shown:
        """The reader has read the log to its end: a turn whose pieces it holds began before where it started."""
        self._caught_up = True
        held, self._held = self._held, []
        return self.pieces(held)

    def logged(self, event: StreamEvent) -> list[StreamEvent]:
        """What a logged event shows: a turn's end shows what this reader has not read of it."""
        if isinstance(event, StepStarted):
            self._started.add(event.turn)
            self._had = None  # it reads this turn from its start
            held = [p for p in self._held if p.turn == event.turn]
            self._held = [p for p in self._held if p.turn != event.turn]
            return [event, *(shown for shown, _ in self.pieces(held))]
        if isinstance(event, ModelSaid):
            if event.turn not in self._started:
                self._join(event.turn)
            self._ended.add(event.turn)
            shown: list[StreamEvent] = []
            reasoning = event.reasoning[self._read.get((event.turn, "reasoning"), 0) :]
            text = event.text[self._read.get((event.turn, "text"), 0) :]
            if reasoning:
                shown.append(ReasoningDelta(reasoning))
            if text:
                shown.append(TextDelta(text))
            if event.usage is not None:
                shown.append(event.usage)
            return shown
        return [event]

    def pieces(self, pieces: list[Piece]) -> Shown:
        shown: Shown = []
        for piece in pieces:
            if piece.run_id != self.run_id or piece.turn in self._ended:
                continue
            if piece.turn not in self._started:
                if not self._caught_up:
                    self._held.append(piece)
                    continue
                self._started.add(piece.turn)  # its start was before where this reader began
                self._join(piece.turn)
            slot = (piece.turn, piece.call_id or piece.kind)
            read = self._read.get(slot, 0)
            if piece.offset > read or (piece.offset + len(piece.text) <= read and (piece.text or read)):
                continue  # a gap (the reader fell behind: the turn's end brings the rest), or read already
            text = piece.text[read - piece.offset :]
            self._read[slot] = piece.offset + len(piece.text)
            event: StreamEvent
            if piece.kind == "text":
                event = TextDelta(text)
            elif piece.kind == "reasoning":
                event = ReasoningDelta(text)
            else:
                event = ToolInputDelta(piece.call_id, piece.name, text, first=read == 0 and piece.offset == 0)
            shown.append((event, self._have(piece.turn)))
        return shown
