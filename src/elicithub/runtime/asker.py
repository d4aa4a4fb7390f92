"""The one way a tool call asks a person: replay what was answered before, record the pause, ask all, wait."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from elicithub import logfields, telemetry
from elicithub.core.broker import Broker
from elicithub.core.elicitation import Elicitation
from elicithub.core.events import RunPaused, StreamEvent
from elicithub.core.runs import Pause
from elicithub.core.waiting import Resolution
from elicithub.runtime.parking import Parked, Spot

SavePause = Callable[[Pause], Awaitable[None]]
SaveChecked = Callable[[Pause], Awaitable[bool]]
"""Save a pause and read whether the run is still active, the read made after the pause and the questions stored
along with it (so in the same write, on a store that applies one turn's writes and reads in order)."""
Emit = Callable[[StreamEvent], Awaitable[object]]
Opened = Callable[[list[Elicitation]], Awaitable[None]]


async def _nothing(_: Any) -> None:
    return None


async def _always() -> bool:
    return True


class Asker:
    """One tool call's questions. Every trigger asks through this, so pauses look alike whoever asked.

    `resume` is where the call stopped before the run was interrupted (a restart, another instance): the
    trigger continues from it, and a question asked again the same way gets the earlier answer instead of
    being shown twice. `active` says whether the run still has the conversation: a question opened once a new
    message has superseded it is cancelled at once. `parking`: where the run may park, ending its task while a
    round waits, when the trigger can go on from the pause alone (raising Parked; it resumes from its pause).
    `checked`: saves a pause and reads `active` in one go, after the questions are stored (else read after them).

    `stopped`: a question of this call ended because the run was stopped (its task cancelled, a new message): the
    cancellation is no person's answer, so the call must not take it downstream (a retry, a new call), only end.
    """

    def __init__(
        self,
        broker: Broker,
        *,
        save: SavePause = _nothing,
        emit: Emit = _nothing,
        resume: Pause | None = None,
        agent_path: tuple[str, ...] = (),
        active: Callable[[], Awaitable[bool]] = _always,
        parking: Spot | None = None,
        checked: SaveChecked | None = None,
    ) -> None:
        self.broker = broker
        self.agent_path = agent_path
        self._save = save
        self._emit = emit
        self._resume = resume
        self._active = active
        self._parking = parking
        self._checked = checked
        self._earlier = list(resume.elicitation_ids.values()) if resume is not None else []
        self.paused = False
        self.stopped = False

    @property
    def asking_again(self) -> bool:
        """Whether the call runs again after an interruption, its questions asked before (and maybe answered) being
        asked again: one asked the same way gets its earlier id instead of the new one."""
        return bool(self._earlier)

    def resume_from(self) -> Pause | None:
        """Where the interrupted call stopped, the first time the call asks; None afterwards."""
        resume, self._resume = self._resume, None
        return resume

    async def active(self) -> bool:
        """Whether the run still has its conversation: a call working on without asking (a downstream task) stops
        once a new message has superseded it (or the run was stopped), and so does the run."""
        active = await self._active()
        self.stopped = self.stopped or not active
        return active

    def forget_earlier(self) -> None:
        """The call went past where it was interrupted: the questions it asks from now on are new ones, even when
        they read like one asked before (a downstream task that asks the same again in a later round)."""
        self._earlier.clear()

    async def ask(
        self,
        elicitations: list[Elicitation],
        *,
        trigger: str,
        keys: list[str] | None = None,
        state: Mapping[str, Any] | None = None,
        resumable: bool = False,
        opened: Opened | None = None,
    ) -> list[Resolution]:
        """Ask a round of questions together and wait until each has ended (answered, declined, expired...).

        `resumable`: the trigger goes on from `state` alone, holding nothing open downstream meanwhile (a 2026-07-28
        round, a sign-in), so a run that parks may let go of its task while the round waits. `opened`: told of the
        questions once they are stored and shown, those asked for the first time only (not one asked before an
        interruption, which this asks again), before the run waits or parks."""
        keys = keys if keys is not None else [str(i) for i in range(len(elicitations))]
        if len(self.agent_path) > 1:  # a delegated agent asks: say which, outermost first
            path = list(self.agent_path)
            elicitations = [replace(e, context={**e.context, "agentPath": path}) for e in elicitations]
        ids: dict[str, str] = {}
        fresh: list[Elicitation] = []
        for key, elicitation in zip(keys, elicitations, strict=True):
            earlier = await self._asked_before(elicitation)
            if earlier is None:
                fresh.append(elicitation)
            ids[key] = (earlier or elicitation).id
        with self._holding(resumable, ids.values()) as parking:
            # The pause is stored with the questions, before any of them shows: a run resumed elsewhere finds them.
            pause = Pause(trigger, ids, state or {})
            read: list[bool] = []
            await self.broker.open(*fresh, along=self._pause_along(pause, read))
            self.paused = True
            if not (read[0] if read else await self._active()):
                # Superseded meanwhile. The supersede cancelled what the run's pause named when it read it, which
                # may have been before these were stored; read after storing them, one of the two sees every one.
                await self.broker.cancel(list(ids.values()))
                self.stopped = True
                return await self._wait([ids[k] for k in keys], shown={}, parking=parking)
            if opened is not None and fresh:
                await opened(fresh)
            return await self._wait([ids[k] for k in keys], shown={e.id: e for e in fresh}, parking=parking)

    async def _pause_along(self, pause: Pause, read: list[bool]) -> None:
        if self._checked is None:
            await self._save(pause)
        else:
            read.append(await self._checked(pause))

    async def checkpoint(
        self, trigger: str, state: Mapping[str, Any], elicitation_ids: dict[str, str] | None = None
    ) -> None:
        """Record where the call is without asking anything (a delegation notes its child run; a downstream task
        notes that it was told a round's answers, keeping that round's `elicitation_ids`), so a resumed run gets
        it back from `resume_from()`."""
        await self._save(Pause(trigger, elicitation_ids or {}, state))

    async def answers(self, pause: Pause, *, resumable: bool = False) -> dict[str, Resolution | None]:
        """The answers to a round asked before the run was interrupted, waiting for those still open (`resumable`:
        as for `ask`).

        None for a question the store no longer knows (purged long after it ended).
        """
        known: dict[str, str] = {}
        for key, elicitation_id in pause.elicitation_ids.items():
            if await self.broker.store.get(elicitation_id) is not None:
                known[key] = elicitation_id
        with self._holding(resumable, known.values()) as parking:
            resolutions = await self._wait(list(known.values()), shown={}, parking=parking)
        by_id = dict(zip(known.values(), resolutions, strict=True))
        return {key: by_id.get(elicitation_id) for key, elicitation_id in pause.elicitation_ids.items()}

    @contextlib.contextmanager
    def _holding(self, resumable: bool, elicitation_ids: Iterable[str]) -> Iterator[Spot | None]:
        """Where the run parks while this round waits, its place held before any question shows or is read (so no
        end is missed), and let go unless it parks; None when it waits in its task. With telemetry on it waits:
        each question's span is a child of the call's."""
        if not resumable or self._parking is None or telemetry.enabled():
            yield None
            return
        self._parking.hold(elicitation_ids)
        try:
            yield self._parking
        except Parked:
            raise
        except BaseException:
            self._parking.release()
            raise

    async def _wait(
        self, ids: list[str], shown: dict[str, Elicitation], parking: Spot | None = None
    ) -> list[Resolution]:
        waiting = [e for i in ids if (e := shown.get(i) or await self.broker.reopen(i)) is not None]
        if waiting:
            await self._emit(RunPaused(tuple(e.id for e in waiting)))
        if parking is not None:
            if waiting:
                parking.parks(waiting, ids)
                raise Parked
            parking.release()
        with logfields.about(elicitation_id=",".join(ids)), telemetry.questions(waiting) as ended:
            resolutions = await self.broker.wait_all(ids, ended, {e.id: e for e in waiting})
        if not self.stopped and any(r.outcome == "cancelled" for r in resolutions):
            # Its person's cancel, or the run's stop: a stop takes the run from its conversation before it cancels.
            await self.active()
        return resolutions

    async def _asked_before(self, elicitation: Elicitation) -> Elicitation | None:
        """The same question asked before the interruption, if any (a rerun asks its questions again)."""
        for elicitation_id in list(self._earlier):
            old = await self.broker.store.get(elicitation_id)
            if old is None:
                self._earlier.remove(elicitation_id)
            elif (old.mode, old.message, old.requested_schema) == (
                elicitation.mode,
                elicitation.message,
                elicitation.requested_schema,
            ):
                self._earlier.remove(elicitation_id)
                return old
        return None
