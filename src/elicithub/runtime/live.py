"""Model turns as they stream: each piece goes at once to this hub's readers of the conversation and, merged over at
most `MERGE_S`, to every other hub's (the store's casts), never to the event log, which keeps the turn once it ends
(`ModelSaid`). A reader that comes mid-turn gets the text so far (`snapshot`), then the rest; a stop reaches the
turn wherever it streams and closes the model's request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from elicithub.core.ports import CAST_MAX_BYTES, Casts, KeyValueStore

log = logging.getLogger(__name__)

MERGE_S = 0.05
"""Pieces go to other hubs this long after the first of them, and then at most this often, merged."""
SNAPSHOT_TTL_S = 900.0
"""A turn's text so far is kept for readers on other hubs at most this long after its last piece."""
STOPPED_S = 600.0
"""How long a stop is remembered for a run whose turn has not begun yet."""
QUEUE_LEN = 4096
"""Pieces a reader may fall behind by; past that it skips to the turn's end, which brings the rest whole."""
_PIECE_CHARS = 1500
"""A piece sent to other hubs is cut to at most this many characters (4 bytes each at most: a message fits)."""

Kind = Literal["text", "reasoning", "tool-input"]


@dataclass(frozen=True)
class Piece:
    """Some of what turn `turn` of run `run_id` says: `text` goes after `offset` characters of its kind (of its
    call's input, for `tool-input`)."""

    run_id: str
    turn: str
    kind: Kind
    offset: int
    text: str
    call_id: str = ""
    name: str = ""


class Turn:
    """One model turn of a run on this hub, as its model streams it. Pieces wait until `open` (the turn's start is
    on the log, so a reader never sees its text before its step); `stop` ends the model's request."""

    def __init__(self, live: LiveTurns, key: str, run_id: str, turn: str) -> None:
        self._live = live
        self.key = key
        self.run_id = run_id
        self.turn = turn
        self.text = ""
        self.reasoning = ""
        self._inputs: dict[str, int] = {}
        self._opened = False
        self._held: list[Piece] = []
        self._outbox: list[Piece] = []
        self._flushing: asyncio.Task[None] | None = None
        self.kept = False
        """Whether its text so far was kept for other hubs (and so must be forgotten)."""
        self._sending = False
        self.stopped = False
        self.task: asyncio.Task[object] | None = None
        """The task streaming the model's answer: a stop cancels it."""

    def add_text(self, delta: str) -> None:
        if delta:
            self._add(Piece(self.run_id, self.turn, "text", len(self.text), delta))
            self.text += delta

    def add_reasoning(self, delta: str) -> None:
        if delta:
            self._add(Piece(self.run_id, self.turn, "reasoning", len(self.reasoning), delta))
            self.reasoning += delta

    def add_tool_input(self, call_id: str, name: str, delta: str) -> None:
        offset = self._inputs.get(call_id, 0)
        if delta or call_id not in self._inputs:
            self._add(Piece(self.run_id, self.turn, "tool-input", offset, delta, call_id, name))
            self._inputs[call_id] = offset + len(delta)

    def _add(self, piece: Piece) -> None:
        if not self._opened:
            self._held.append(piece)
            return
        self._live.deliver(self.key, [piece])
        if self._live.shared:
            self._outbox.append(piece)
            if self._flushing is None or self._flushing.done():
                self._flushing = asyncio.create_task(self._flush())

    def open(self) -> None:
        """The turn's start is on the log: its pieces go to readers from now on."""
        self._opened = True
        held, self._held = self._held, []
        for piece in held:
            self._add(piece)

    def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()

    async def _flush(self) -> None:
        """Send the outbox to other hubs MERGE_S after its first piece, then at most once per MERGE_S: the text so
        far first (for a reader that comes now), then the pieces. A turn that ends sooner sends nothing: its
        `ModelSaid` brings other hubs' readers all of it."""
        while self._outbox:
            await asyncio.sleep(MERGE_S)
            pieces, self._outbox = self._outbox, []
            self._sending = self.kept = True
            try:
                await self._live.save_snapshot(self)
            except Exception:
                log.warning("the text so far of run %s could not be kept for other hubs", self.run_id, exc_info=True)
            finally:
                self._sending = False
            self._live.cast_pieces(self.key, pieces)

    async def end(self) -> None:
        """The turn ended (its `ModelSaid` is on the log): nothing more goes to other hubs (that brings their
        readers the rest), and its text so far is forgotten."""
        self.open()
        if self._flushing is not None:
            if not self._sending:  # waiting for its moment: it never comes (a store's command is never cut short)
                self._flushing.cancel()
            self._outbox = []
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._flushing
        await self._live.ended(self)


class LiveTurns:
    """This hub's turns that stream, its readers' queues by conversation key, and the casts that join other hubs'."""

    def __init__(self, casts: Casts, kv: KeyValueStore | None, instance: str, shared: bool) -> None:
        self._casts = casts
        self._kv = kv
        self.instance = instance
        self.shared = shared and kv is not None
        """Whether other hubs may read these conversations (the store is shared): then pieces go to them too."""
        self._turns: dict[tuple[str, str], Turn] = {}
        self._readers: dict[str, set[asyncio.Queue[Piece]]] = {}
        self._stopped: dict[str, float] = {}

    async def start(self) -> None:
        """Hear other hubs' pieces and stops."""
        await self._casts.listen(self._received)

    def begin(self, key: str, run_id: str, turn: str) -> Turn:
        current = Turn(self, key, run_id, turn)
        self._turns[key, run_id] = current
        if run_id in self._stopped:
            current.stopped = True
        return current

    def drop(self, turn: Turn) -> None:
        """The turn no longer streams here (it ended, or the hub stops)."""
        if self._turns.get((turn.key, turn.run_id)) is turn:
            del self._turns[turn.key, turn.run_id]

    async def ended(self, turn: Turn) -> None:
        self.drop(turn)
        if turn.kept:
            try:
                assert self._kv is not None
                await self._kv.delete(_snapshot_key(turn.run_id))
            except Exception:
                log.warning("the text so far of run %s could not be forgotten", turn.run_id, exc_info=True)

    def stop(self, key: str, run_id: str) -> None:
        """The run was superseded or stopped: its turn ends here or on the hub it streams on."""
        self._stop(key, run_id)
        if self.shared:
            self._send({"h": self.instance, "k": key, "stop": run_id})

    def _stop(self, key: str, run_id: str) -> None:
        now = time.monotonic()
        self._stopped = {r: at for r, at in self._stopped.items() if now - at < STOPPED_S}
        self._stopped[run_id] = now
        current = self._turns.get((key, run_id))
        if current is not None:
            current.stop()

    def stopped(self, run_id: str) -> bool:
        return run_id in self._stopped

    # -- readers

    @contextlib.contextmanager
    def subscribe(self, key: str) -> Iterator[asyncio.Queue[Piece]]:
        """A queue of the pieces of `key`'s turns from now on, wherever they stream."""
        queue: asyncio.Queue[Piece] = asyncio.Queue(QUEUE_LEN)
        self._readers.setdefault(key, set()).add(queue)
        try:
            yield queue
        finally:
            readers = self._readers.get(key)
            if readers is not None:
                readers.discard(queue)
                if not readers:
                    del self._readers[key]

    def deliver(self, key: str, pieces: list[Piece]) -> None:
        for queue in self._readers.get(key, ()):
            for piece in pieces:
                with contextlib.suppress(asyncio.QueueFull):  # it falls behind: the turn's end brings the rest
                    queue.put_nowait(piece)

    async def snapshot(self, key: str, run_id: str) -> list[Piece]:
        """What `run_id`'s turn has said so far, as pieces from its start (none when no turn streams)."""
        current = self._turns.get((key, run_id))
        if current is not None:
            return _so_far(run_id, current.turn, current.text, current.reasoning)
        if self._kv is None or not self.shared:
            return []
        raw = await self._kv.get(_snapshot_key(run_id))
        if raw is None:
            return []
        saved = json.loads(raw)
        return _so_far(run_id, saved["t"], saved.get("text", ""), saved.get("reasoning", ""))

    async def save_snapshot(self, turn: Turn) -> None:
        saved = {"t": turn.turn, "text": turn.text, "reasoning": turn.reasoning}
        assert self._kv is not None
        await self._kv.put(_snapshot_key(turn.run_id), json.dumps(saved).encode(), SNAPSHOT_TTL_S)

    # -- other hubs

    def cast_pieces(self, key: str, pieces: list[Piece]) -> None:
        """Send `pieces` in as few messages as fit."""
        batch: list[list[object]] = []
        size = 0
        for piece in pieces:
            for offset, text in _cut(piece.offset, piece.text):
                entry: list[object] = [piece.run_id, piece.turn, piece.kind, offset, text, piece.call_id, piece.name]
                cost = len(json.dumps(entry).encode())
                if batch and size + cost > CAST_MAX_BYTES - 200:
                    self._send({"h": self.instance, "k": key, "p": batch})
                    batch, size = [], 0
                batch.append(entry)
                size += cost
        if batch:
            self._send({"h": self.instance, "k": key, "p": batch})

    def _send(self, message: dict[str, object]) -> None:
        self._casts.send(json.dumps(message, separators=(",", ":")))

    def _received(self, raw: str) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            log.warning("a cast that is not JSON was passed over")
            return
        if message.get("h") == self.instance:
            return  # this hub's own: its readers had the pieces at once, and it stopped its own turn
        key = message.get("k")
        if not isinstance(key, str):
            return
        if "stop" in message:
            self._stop(key, str(message["stop"]))
        elif key in self._readers:
            self.deliver(key, [Piece(*entry) for entry in message.get("p", [])])


def _snapshot_key(run_id: str) -> str:
    return f"live-turn:{run_id}"


def _so_far(run_id: str, turn: str, text: str, reasoning: str) -> list[Piece]:
    pieces = []
    if reasoning:
        pieces.append(Piece(run_id, turn, "reasoning", 0, reasoning))
    if text:
        pieces.append(Piece(run_id, turn, "text", 0, text))
    return pieces


def _cut(offset: int, text: str) -> Iterator[tuple[int, str]]:
    if len(text) <= _PIECE_CHARS:
        yield offset, text
        return
    for start in range(0, len(text), _PIECE_CHARS):
        yield offset + start, text[start : start + _PIECE_CHARS]
