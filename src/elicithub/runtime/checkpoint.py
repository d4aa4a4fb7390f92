"""A run's saves as its tool calls go: each save lands in order, and a checkpoint says where the calls are, so a
resumed run continues the call where it stopped and never makes a finished one again."""

from __future__ import annotations

import asyncio

from elicithub.core.ports import RunStore
from elicithub.core.runs import Message, Pause, RunRecord, ToolCall, next_status


class Saves:
    """One run's saves, landing in the order they are made: each waits until the one before has landed. The run's
    first save (`first`) is left in flight while the run goes on, so it goes in one write with the run's next reads;
    the run's first call waits for it (`landed`), so no call is made for a run that is not on record."""

    def __init__(self, runs: RunStore, first: RunRecord | None = None) -> None:
        self.runs = runs
        self._first = None if first is None else asyncio.ensure_future(runs.save(first))

    async def landed(self) -> None:
        if self._first is not None:
            await asyncio.shield(self._first)  # a cancelled run leaves its first save to land
            self._first = None

    async def save(self, record: RunRecord) -> None:
        await self.landed()
        await self.runs.save(record)


class Checkpoint:
    """A run's record as its tool calls go: saved when a call pauses (or notes where it is) and when it ends, so a
    resumed run continues the call where it stopped and never makes a finished one again."""

    def __init__(self, saves: Saves, record: RunRecord) -> None:
        self.saves = saves
        self.record = record

    def start(self, messages: list[Message], calls: list[ToolCall], index: int) -> None:
        """Call `index` of `calls` begins, after `messages`; nothing to save until it pauses or ends."""
        self.record = self.record.with_(messages=list(messages), tool_calls=calls, call_index=index, pause=None)

    async def pause(self, pause: Pause) -> None:
        self.record = self.record.with_(pause=pause, status=next_status(self.record.status, "pause"))
        await self.saves.save(self.record)

    async def done(self, messages: list[Message]) -> None:
        """The call ended and its result is the last of `messages`."""
        status = next_status(self.record.status, "continue")
        call_index = self.record.call_index + 1
        self.record = self.record.with_(messages=list(messages), call_index=call_index, pause=None, status=status)
        await self.saves.save(self.record)
