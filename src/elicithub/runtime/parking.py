"""Parked runs: a run paused on questions lets go of its task while they wait, and goes on from its stored pause
once they have all ended (answered, declined, expired or cancelled, on any instance).

A waiting run's task is a live stack from the run loop down to the trigger, tens of KB. Its pause is durable (a
restart resumes from it), so when the trigger can go on from the pause alone the run can end its task like a run
cut short by a shutdown, and resume from the store the same way; what stays is one small entry per run here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, KeysView
from dataclasses import dataclass, field
from datetime import datetime

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Elicitation, State, utcnow
from elicithub.core.events import ElicitationResolved

log = logging.getLogger(__name__)

Resume = Callable[[str], Awaitable[None]]


class Parked(BaseException):
    """Unwinds a paused run's task while its questions wait. A BaseException, like a cancellation, so that no
    `except Exception` takes it for the tool call's failure and no span records it as an error."""


@dataclass
class _Round:
    """One run's round: the questions not yet known to have ended, those whose end was heard from another instance
    (announced again here before the run goes on, as a waiter here would), and whether its task has ended."""

    waiting: set[str]
    elsewhere: list[str] = field(default_factory=list)
    parked: bool = False
    due: datetime | None = None
    """When the last of its questions expires: past it, the round is read back (`check_overdue`)."""


class Parking:
    """The runs parked on this instance (their owner), by run id; `resume(run_id)` goes on with one."""

    def __init__(self, broker: Broker, resume: Resume) -> None:
        self.broker = broker
        self._resume = resume
        self._rounds: dict[str, _Round] = {}
        self._runs: dict[str, str] = {}  # question id -> the run parked on it
        self._going_on: set[asyncio.Task[None]] = set()

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._rounds

    def __len__(self) -> int:
        return len(self._rounds)

    def runs(self) -> KeysView[str]:
        return self._rounds.keys()

    def spot(self, run_id: str) -> Spot:
        return Spot(self, run_id)

    def hold(self, run_id: str, elicitation_ids: Iterable[str]) -> None:
        """Hear of each question's end from now on, before it shows (or is read to see whether it is still open), so
        no end falls between that and the run's parking."""
        self._rounds[run_id] = _Round(set(elicitation_ids))
        for elicitation_id in self._rounds[run_id].waiting:
            self._runs[elicitation_id] = run_id
            self.broker.park(elicitation_id, self.ended)

    def release(self, run_id: str) -> None:
        """The run waits after all (nothing open to wait on, or it cannot park): hear of nothing more."""
        round_ = self._rounds.pop(run_id, None)
        for elicitation_id in round_.waiting if round_ is not None else ():
            self._runs.pop(elicitation_id, None)
            self.broker.unpark(elicitation_id)

    def parks(self, run_id: str, waiting: list[Elicitation], elicitation_ids: list[str]) -> None:
        """The run is about to park on `waiting`; the rest of its round's `elicitation_ids` were read as ended."""
        round_ = self._rounds[run_id]
        round_.due = max(e.expires_at for e in waiting)
        for elicitation_id in set(elicitation_ids) - {e.id for e in waiting}:
            self.ended(elicitation_id, announced=True)

    def park(self, run_id: str) -> None:
        """The run's task has ended (Parked): it goes on once its round has, which may be now."""
        round_ = self._rounds.get(run_id)
        if round_ is not None:
            round_.parked = True
            self._go_on_if_over(run_id, round_)

    def ended(self, elicitation_id: str, announced: bool) -> None:
        """The broker's report: a question ended, here (announced on its run's stream) or on another instance."""
        run_id = self._runs.pop(elicitation_id, None)
        self.broker.unpark(elicitation_id)
        round_ = None if run_id is None else self._rounds.get(run_id)
        if run_id is None or round_ is None or elicitation_id not in round_.waiting:
            return
        round_.waiting.discard(elicitation_id)
        if not announced:
            round_.elsewhere.append(elicitation_id)
        self._go_on_if_over(run_id, round_)

    def _go_on_if_over(self, run_id: str, round_: _Round) -> None:
        if round_.parked and not round_.waiting:
            round_.parked = False  # once
            going_on = asyncio.create_task(self._go_on(run_id, round_.elsewhere))
            self._going_on.add(going_on)
            going_on.add_done_callback(self._going_on.discard)

    async def _go_on(self, run_id: str, elsewhere: list[str]) -> None:
        """Resume the run; it counts as parked until then, so the sweep's recover() never takes it meanwhile."""
        try:
            for elicitation_id in elsewhere:
                stored = await self.broker.store.get(elicitation_id)
                if stored is not None and stored.outcome is not None:
                    resolved = ElicitationResolved(stored.id, stored.outcome, stored.answered_by)
                    await self.broker.events.publish(stored, resolved)
            await self._resume(run_id)
        except Exception:
            log.exception("resuming parked run %s failed; the sweep resumes it", run_id)
        finally:
            self._rounds.pop(run_id, None)

    async def check_overdue(self) -> None:
        """Read back the rounds past their deadline (the sweep's): a waiting task would have woken at it, so an end
        whose notice was lost (a store's subscription dropped it) still resumes its run."""
        now = utcnow()
        for round_ in [r for r in self._rounds.values() if r.parked and r.due is not None and r.due < now]:
            for elicitation_id in list(round_.waiting):
                stored = await self.broker.store.get(elicitation_id)
                if stored is None or stored.state is not State.PENDING:
                    self.ended(elicitation_id, announced=False)

    async def close(self) -> list[str]:
        """Forget every parked run (they stay on record, for a hub to resume); the questions they waited on."""
        for going_on in list(self._going_on):
            going_on.cancel()
        await asyncio.gather(*self._going_on, return_exceptions=True)
        waiting = list(self._runs)
        for elicitation_id in waiting:
            self.broker.unpark(elicitation_id)
        self._rounds.clear()
        self._runs.clear()
        return waiting


@dataclass(frozen=True)
class Spot:
    """Where one run parks: what its asker holds (runtime/asker.py)."""

    parking: Parking
    run_id: str

    def hold(self, elicitation_ids: Iterable[str]) -> None:
        self.parking.hold(self.run_id, elicitation_ids)

    def parks(self, waiting: list[Elicitation], elicitation_ids: list[str]) -> None:
        self.parking.parks(self.run_id, waiting, elicitation_ids)

    def release(self) -> None:
        self.parking.release(self.run_id)
