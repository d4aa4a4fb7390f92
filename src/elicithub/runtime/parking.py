"""Parked runs: a run paused on questions lets go of its task while they wait, and goes on from its stored pause
once they have all ended (answered, declined, expired or cancelled, on any instance).

A waiting run's task is a live stack from the run loop down to the trigger, tens of KB. Its pause is durable (a
restart resumes from it), so when the trigger can go on from the pause alone the run can end its task like a run
cut short by a shutdown, and resume from the store the same way; what stays is one small entry per run here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, KeysView
from dataclasses import dataclass, field

from elicithub.core.broker import Broker
from elicithub.core.elicitation import State
from elicithub.core.events import ElicitationResolved

log = logging.getLogger(__name__)

Resume = Callable[[str], Awaitable[None]]


class Parked(BaseException):
    """Unwinds a paused run's task while its questions wait. A BaseException, like a cancellation, so that no
    `except Exception` takes it for the tool call's failure and no span records it as an error."""

    def __init__(self, elicitation_ids: list[str]) -> None:
        super().__init__(f"parked on {len(elicitation_ids)} question(s)")
        self.elicitation_ids = elicitation_ids


@dataclass
class _Round:
    """One parked run's round: the questions not yet known to have ended, and those whose end was heard from
    another instance (announced again here before the run goes on, as a waiter here would)."""

    waiting: set[str]
    elsewhere: list[str] = field(default_factory=list)


class Parking:
    """The runs parked on this instance (their owner), by run id; `resume(run_id)` goes on with one."""

    def __init__(self, broker: Broker, resume: Resume) -> None:
        self.broker = broker
        self._resume = resume
        self._rounds: dict[str, _Round] = {}
        self._runs: dict[str, str] = {}  # question id -> the run parked on it
        self._checks: set[asyncio.Task[None]] = set()

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._rounds

    def __len__(self) -> int:
        return len(self._rounds)

    def runs(self) -> KeysView[str]:
        return self._rounds.keys()

    async def park(self, run_id: str, elicitation_ids: list[str]) -> None:
        """Hold `run_id` until each of `elicitation_ids` has ended. The questions are read after the broker is
        told to report their ends, so one that ended in between (after the pause was saved) is not missed."""
        self._rounds[run_id] = _Round(set(elicitation_ids))
        for elicitation_id in elicitation_ids:
            self._runs[elicitation_id] = run_id
            self.broker.park(elicitation_id, self._ended)
        for elicitation_id in elicitation_ids:
            stored = await self.broker.store.get(elicitation_id)
            if stored is None or stored.state is not State.PENDING:
                self._ended(elicitation_id, announced=False)

    def _ended(self, elicitation_id: str, announced: bool) -> None:
        """The broker's report: a question ended, here (announced on the run's stream) or elsewhere."""
        run_id = self._runs.pop(elicitation_id, None)
        self.broker.unpark(elicitation_id)
        round_ = None if run_id is None else self._rounds.get(run_id)
        if run_id is None or round_ is None or elicitation_id not in round_.waiting:
            return
        round_.waiting.discard(elicitation_id)
        if not announced:
            round_.elsewhere.append(elicitation_id)
        if not round_.waiting:
            check = asyncio.create_task(self._go_on(run_id, round_.elsewhere))
            self._checks.add(check)
            check.add_done_callback(self._checks.discard)

    async def _go_on(self, run_id: str, elsewhere: list[str]) -> None:
        """Resume the run; it counts as parked until then, so the sweep's recover() never takes it meanwhile."""
        try:
            for elicitation_id in elsewhere:
                stored = await self.broker.store.get(elicitation_id)
                if stored is not None and stored.outcome is not None:
                    await self.broker.events.publish(stored, ElicitationResolved(stored.id, stored.outcome))
            await self._resume(run_id)
        except Exception:
            log.exception("resuming parked run %s failed; the sweep resumes it", run_id)
        finally:
            self._rounds.pop(run_id, None)

    async def close(self) -> list[str]:
        """Forget every parked run (they stay on record, for a hub to resume); the questions they waited on."""
        for check in list(self._checks):
            check.cancel()
        await asyncio.gather(*self._checks, return_exceptions=True)
        waiting = list(self._runs)
        for elicitation_id in waiting:
            self.broker.unpark(elicitation_id)
        self._rounds.clear()
        self._runs.clear()
        return waiting
