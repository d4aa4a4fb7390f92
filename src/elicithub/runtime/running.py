"""The runs this instance goes on with: each in a task of its own, or parked while its questions wait, and those
taken over from instances that are gone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from elicithub.core.broker import Broker
from elicithub.core.ports import RunStore
from elicithub.core.runs import RunRecord, conversation_key
from elicithub.runtime.loop import Runner
from elicithub.runtime.parking import Parked, Parking

log = logging.getLogger(__name__)


class Running:
    def __init__(self, runs: RunStore, broker: Broker, runner: Runner, instance: str) -> None:
        self.runs = runs
        self.broker = broker
        self.runner = runner
        self.instance = instance
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._running_in: dict[str, str] = {}
        """The conversation key of each run whose task goes on here."""
        self._parking = Parking(broker, self._unpark)
        self._parked_in: dict[str, str] = {}
        """The conversation key of each run parked here: its history is read back from this hub's `histories`."""
        self._read_by_answer: dict[str, asyncio.Future[RunRecord | None]] = {}
        """A parked run's record as an answer here reads it while it is parked: its unparking needs no read of its
        own."""
        self._watchers: list[Callable[[RunRecord], None]] = []

    def watch(self, watcher: Callable[[RunRecord], None]) -> None:
        """Tell `watcher` of each run as it starts or resumes here."""
        self._watchers.append(watcher)

    def conversation_of(self, run_id: str) -> str | None:
        """The conversation key of a run whose task goes on here, else None."""
        return self._running_in.get(run_id)

    def read(self, run_id: str) -> asyncio.Future[RunRecord | None]:
        """Start reading a run's record for an answer to one of its questions. A run parked here is read whole (its
        history is the one this hub holds), so it resumes without a read of its own."""
        parked_in = self._parked_in.get(run_id)
        read = asyncio.ensure_future(
            self.runs.get(
                run_id,
                messages=parked_in is not None,
                known=self.runner.histories.first(parked_in) if parked_in is not None else (),
            )
        )
        if parked_in is not None:
            self._read_by_answer[run_id] = read
        return read

    def start(self, record: RunRecord, *, resumed: bool, unparked: bool = False) -> None:
        async def run() -> None:
            try:
                parking = self._parking.spot(record.run_id)
                await self.runner.run(record, resumed=resumed, parking=parking, unparked=unparked, saves=saves)
            except Parked:
                # Its pause is on record: held here until the round ends, then resumed from it (`_unpark`).
                self._parked_in[record.run_id] = conversation_key(record.user_id, record.conversation_id)
                self._parking.park(record.run_id)
            finally:
                if self._tasks.get(record.run_id) is task:  # not the task of a run resumed meanwhile
                    del self._tasks[record.run_id], self._running_in[record.run_id]

        saves = None if resumed else self.runner.start(record)
        # Registered before anything is awaited, so a sweep never takes a run this instance is starting.
        task = self._tasks[record.run_id] = asyncio.create_task(run())
        self._running_in[record.run_id] = conversation_key(record.user_id, record.conversation_id)
        if not unparked:  # a watcher of a run follows it through its parking
            for watcher in self._watchers:
                watcher(record)

    async def _unpark(self, run_id: str) -> None:
        """A parked run's round ended: it goes on here, from its record, as after a restart."""
        key = self._parked_in.pop(run_id, None)
        reading = self._read_by_answer.pop(run_id, None)
        record = None
        if reading is not None:
            with contextlib.suppress(Exception):  # read again below
                record = await reading
        if record is None:
            known = self.runner.histories.first(key) if key is not None else []
            record = await self.runs.get(run_id, known=known)
        if record is None or record.status == "finished":
            return  # stopped for good
        if record.owner != self.instance:
            # Taken over by another instance meanwhile; or it was ours, taken from an instance that was only slow,
            # and that instance wrote itself back as owner before it died: the sweep passes over a run parked here,
            # so nobody would continue it. Continued here unless its owner lives.
            if await self.runs.alive(record.owner) or not await self.runs.claim(run_id, record.owner, self.instance):
                return
            record = replace(record, owner=self.instance)
        self.start(record, resumed=True, unparked=True)

    def running(self) -> int:
        """Runs of this instance: going, or parked while their questions wait."""
        return len(self._tasks.keys() | self._parking.runs())  # a run parking still ends its task

    def parked(self) -> int:
        """Runs of this instance parked (or parking): waiting on their questions without a task."""
        return len(self._parking)

    async def recover(self) -> int:
        """Continue the unfinished runs of instances that are gone (and this one's own, after a restart), and the
        runs parked here whose round is over although no notice said so."""
        await self._parking.check_overdue()
        runs = self.runs
        taken = 0
        for listed in await runs.unfinished():
            if listed.run_id in self._tasks or listed.run_id in self._parking:
                continue
            # Read it again now that it is known not to run here: a run of ours may have finished since the list.
            record = await runs.get(listed.run_id)
            if record is None or record.status == "finished" or record.parent_run_id is not None:
                continue  # a delegated run is continued by its parent's call
            if record.owner != self.instance and await runs.alive(record.owner):
                continue
            if not await runs.claim(record.run_id, record.owner, self.instance):
                continue  # another instance took it first
            self.start(replace(record, owner=self.instance), resumed=True)
            taken += 1
        if taken:
            log.info("continuing %d interrupted runs", taken)
        return taken

    async def close(self) -> None:
        waiting = await self._parking.close()
        self._read_by_answer.clear()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not self.broker.durable:
            # As a waiting run's would (Broker.wait_all): nobody can use an answer to them any more.
            await self.broker.cancel(waiting)
