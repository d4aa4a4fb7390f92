"""The broker: stores a question, shows it on its run's stream, waits, and takes exactly one answer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from elicithub.core.asked import Asked
from elicithub.core.cancelling import despite_cancellation, settled
from elicithub.core.elicitation import (
    Answer,
    Conflict,
    Elicitation,
    Expire,
    Invalid,
    Repeat,
    Resolve,
    State,
    decide,
    utcnow,
)
from elicithub.core.events import ElicitationRequested, ElicitationResolved
from elicithub.core.listening import Listener
from elicithub.core.opened import Opened
from elicithub.core.ports import Counts, ElicitationStore, EventSink
from elicithub.core.waiting import Resolution, Waiters, Waiting
from elicithub.errors import AlreadyResolved, ElicitationNotFound, Expired, InvalidContent, SelfApprovalRefused

log = logging.getLogger(__name__)


NO_DEADLINE = datetime.max.replace(tzinfo=UTC)
"""Later than any question's deadline."""

Ended = Callable[[str, bool], None]
"""Told that a question ended: its id, and whether it was announced here (else it ended on another instance)."""


class Broker:
    def __init__(
        self, store: ElicitationStore, events: EventSink, *, durable: bool = False, counts: Counts | None = None
    ) -> None:
        self.store = store
        self.events = events
        self.durable = durable
        """Durable: a waiter that goes away (shutdown) leaves its question pending, for the run to resume later."""
        self._counts = counts
        self._waiters = Waiters()
        self._parked: dict[str, Ended] = {}
        self._listener = Listener(store.resolutions, self._heard)
        self._opened = Opened()
        self._transitions: Counter[str] = Counter()
        """Questions this process is moving now: a notice of their end waits for the move's own outcome."""
        self._asked = Asked(counts)

    async def start(self) -> None:
        """Listen to the store, so an answer taken by another process sharing it wakes the waiter here."""
        await self._listener.start()

    async def close(self) -> None:
        await self._listener.close()

    async def request(self, elicitation: Elicitation) -> Resolution:
        """Store the elicitation, publish it on its run's stream, and wait until it ends (answer or deadline)."""
        with self._waiters.join(elicitation) as waiting:
            stored = asyncio.ensure_future(self.store.put(elicitation))
            try:
                await asyncio.shield(stored)
                await self.events.publish(elicitation, ElicitationRequested(elicitation))
                resolution = await self._until_end(elicitation, waiting.future)
            except asyncio.CancelledError:
                # The run went away (shutdown). A durable hub keeps the question open for the run to resume;
                # otherwise nobody can use an answer any more, and the cancel must be stored before we give way,
                # even if the caller keeps cancelling us (anyio does).
                if not self.durable:
                    await despite_cancellation(self._cancel_once_stored(stored, elicitation))
                else:
                    await despite_cancellation(settled(stored))
                raise
        await self._announce_once(waiting, resolution)
        return resolution

    async def open(self, *elicitations: Elicitation, along: Awaitable[None] | None = None) -> None:
        """Store new questions and show them on their run's stream; `wait` for their end. `along`: a write that
        must be stored before any of them shows (the run's pause), made in the same turn as theirs, so a batching
        store sends them together; they show once all are stored."""
        for elicitation in elicitations:
            if self._listener.listening:
                self._opened.note(elicitation.id)
            # Pending here before it is stored: a notice of its end (a supersede) cannot come before it is counted.
            self._asked.add(elicitation)
        try:
            await asyncio.gather(*([] if along is None else [along]), *map(self.store.put, elicitations))
        except BaseException:
            for elicitation in elicitations:
                self._asked.discard(elicitation.id)
            raise
        self._opened.hold(elicitations)
        for elicitation in elicitations:
            await self.events.publish(elicitation, ElicitationRequested(elicitation))

    async def reopen(self, elicitation_id: str) -> Elicitation | None:
        """Show a question asked earlier again (a resumed run); None when it has ended meanwhile. Its end is heard
        here from now on (it may have been opened by another instance, or an earlier process)."""
        parked = elicitation_id in self._parked
        elicitation = await self.store.watch(elicitation_id)
        if elicitation is None or elicitation.state is not State.PENDING:
            return None
        if not parked or elicitation_id in self._parked:  # else its end was heard meanwhile: nothing waits on it
            self._asked.add(elicitation)
        await self.events.publish(elicitation, ElicitationRequested(elicitation))
        return elicitation

    async def _until_end(self, elicitation: Elicitation, future: asyncio.Future[Resolution]) -> Resolution:
        remaining = (elicitation.expires_at - utcnow()).total_seconds()
        try:
            # asyncio.timeout, not wait_for: one timer while it waits, no extra future and callback.
            async with asyncio.timeout(max(remaining, 0)):
                return await asyncio.shield(future)
        except TimeoutError:
            return await self.end(elicitation.id, State.EXPIRED)

    async def _cancel_once_stored(self, stored: asyncio.Future[None], elicitation: Elicitation) -> None:
        try:
            await stored
        except Exception:
            return  # never stored, so there is nothing to cancel
        await self.end(elicitation.id, State.CANCELLED)  # announced by the move, if it is this one's

    async def _announce(self, elicitation: Elicitation, resolution: Resolution) -> None:
        # The process that moves a question announces its end at once (so it goes to the log with what that
        # process writes next). A waiter here announces an end it learnt of from the store, once: another instance
        # moved it and announced it there too; readers of the run's stream keep the first announcement of each.
        resolved = ElicitationResolved(resolution.elicitation_id, resolution.outcome, resolution.answered_by)
        await self.events.publish(elicitation, resolved)

    async def _announce_once(self, waiting: Waiting, resolution: Resolution) -> None:
        if not waiting.announced:
            waiting.announced = True
            await self._announce(waiting.elicitation, resolution)

    async def wait(self, elicitation_id: str, known: Elicitation | None = None) -> Resolution:
        """Wait for a question (opened here or earlier: before a restart, or by another instance) to end. Any
        number may wait for one question; each is woken with the same resolution. `known`: the question as the
        caller holds it (it opened it), so the waiter neither reads nor keeps a copy of its own."""
        elicitation = known or await self.store.get(elicitation_id)
        if elicitation is None:
            raise ElicitationNotFound(elicitation_id)
        if elicitation.state is not State.PENDING:
            return Resolution.of(elicitation)
        heard = self._opened.waited(elicitation_id)
        with self._waiters.join(elicitation) as waiting:
            # It may have ended between the read and the registration: read again now that notices reach us
            # (taking its lease, unless this client stored it), unless it was opened here and no notice came since
            # (its end would have been heard). Only how it ended is kept, not a second copy of the question.
            ended = await self._ended(elicitation_id, watch=known is None) if heard or known is None else None
            if waiting.future.done():
                resolution = waiting.future.result()  # it ended while we registered: ours to announce
            elif ended is not None:
                return ended  # it ended before we registered: that transition announced it
            else:
                resolution = await self._until_end(waiting.elicitation, waiting.future)
        await self._announce_once(waiting, resolution)
        return resolution

    async def _ended(self, elicitation_id: str, watch: bool = False) -> Resolution | None:
        stored = await (self.store.watch(elicitation_id) if watch else self.store.get(elicitation_id))
        return None if stored is None or stored.state is State.PENDING else Resolution.of(stored)

    async def wait_all(
        self,
        elicitation_ids: list[str],
        ended: Callable[[Resolution], None] | None = None,
        known: dict[str, Elicitation] | None = None,
    ) -> list[Resolution]:
        """Wait for several opened questions to end; `ended` (the hub's telemetry) hears of each as it ends; `known`
        as for `wait`. If the run goes away meanwhile, a hub that keeps nothing across a shutdown cancels them
        (nobody could use an answer any more); a durable one leaves them open."""
        known = known or {}
        try:
            if len(elicitation_ids) == 1:  # the common case, without a task of its own for as long as it waits
                return [await self._wait_one(elicitation_ids[0], ended, known)]
            return list(await asyncio.gather(*(self._wait_one(i, ended, known) for i in elicitation_ids)))
        except asyncio.CancelledError:
            if not self.durable:
                await despite_cancellation(self.cancel(elicitation_ids))
            raise

    async def _wait_one(
        self, elicitation_id: str, ended: Callable[[Resolution], None] | None, known: dict[str, Elicitation]
    ) -> Resolution:
        try:
            resolution = await self.wait(elicitation_id, known.get(elicitation_id))
        finally:
            self._asked.discard(elicitation_id)  # it ended, or the run went away
        if ended is not None:
            ended(resolution)
        return resolution

    async def lookup(
        self,
        elicitation_id: str,
        user_id: str | None,
        conversation_id: str | None = None,
        groups: Collection[str] = (),
    ) -> Elicitation:
        """The elicitation as those who may answer it see it (its owner; for an approval, its approvers, `groups`
        being the user's); to anyone else (or in another conversation) it does not exist, and to a requester who may
        not approve their own call it is refused (SelfApprovalRefused). One opened here and pending is as this hub
        holds it, else as stored."""
        elicitation = self._opened.held(elicitation_id) or await self.store.get(elicitation_id)
        if elicitation is None or (conversation_id is not None and elicitation.conversation_id != conversation_id):
            raise ElicitationNotFound(elicitation_id)
        if elicitation.approval is None:
            if user_id is None or elicitation.user_id != user_id:
                raise ElicitationNotFound(elicitation_id)
            return elicitation
        standing = elicitation.approval.standing(user_id, groups, elicitation.user_id, utcnow())
        if standing == "self":
            raise SelfApprovalRefused(elicitation_id)
        if standing == "none":
            raise ElicitationNotFound(elicitation_id)
        return elicitation

    async def respond(
        self,
        elicitation_id: str,
        answer: Answer,
        user_id: str | None,
        conversation_id: str | None = None,
        looked_up: Elicitation | None = None,
        groups: Collection[str] = (),
    ) -> Resolution:
        """Take a person's answer; raises NotFound, AlreadyResolved, Expired or InvalidContent (and for an approval,
        SelfApprovalRefused). `looked_up`: the question as the caller just had it from `lookup`, saving a read (if it
        has ended since, the compare-and-set fails and the answer is judged again against what is stored)."""
        elicitation = looked_up or await self.lookup(elicitation_id, user_id, conversation_id, groups)
        if elicitation.approval is not None:
            answer = replace(answer, by=user_id)  # who answered is kept with the answer (first answer wins)
        decision = decide(elicitation, answer, utcnow())
        if isinstance(decision, Invalid):
            if looked_up is not None or elicitation is self._opened.held(elicitation_id):
                # Judged against a copy held since it was opened or looked up: if it has ended since, that decides.
                stored = await self.store.get(elicitation_id)
                if stored is not None and stored.state is not State.PENDING:
                    self._opened.let_go(elicitation_id)
                    return await self.respond(elicitation_id, answer, user_id, conversation_id, stored, groups)
            raise InvalidContent(elicitation_id, decision.errors)
        if isinstance(decision, Repeat):
            return Resolution.of(elicitation)
        if isinstance(decision, Conflict):
            raise AlreadyResolved(elicitation_id, elicitation.state.value)
        if isinstance(decision, Expire):
            final = await self.end(elicitation_id, State.EXPIRED)
            if final.outcome != "expired":
                # Another answer won just before the deadline: judge this one against it.
                return await self.respond(elicitation_id, answer, user_id, conversation_id, groups=groups)
            raise Expired(elicitation_id)
        assert isinstance(decision, Resolve)
        if await self._transition(elicitation, decision.state, decision.answer):
            content = decision.answer.content if decision.answer else None
            by = decision.answer.by if decision.answer else None
            return Resolution(elicitation_id, decision.state.outcome, content, by)
        # Someone else resolved it between our read and our write: judge the answer against that outcome.
        return await self.respond(elicitation_id, answer, user_id, conversation_id, groups=groups)

    async def end(self, elicitation_id: str, state: State) -> Resolution:
        """End a pending elicitation without a person's answer (expired, cancelled); returns the final outcome."""
        self._opened.let_go(elicitation_id)
        elicitation = await self.store.get(elicitation_id)
        if elicitation is None:
            raise ElicitationNotFound(elicitation_id)
        if elicitation.state is State.PENDING:
            answer = Answer("cancel") if state is State.CANCELLED else None
            if await self._transition(elicitation, state, answer):
                return Resolution(elicitation_id, state.outcome)
            elicitation = await self.store.get(elicitation_id)
            assert elicitation is not None
        return Resolution.of(elicitation)

    async def expire_due(self) -> int:
        """End every pending elicitation past its deadline whose waiter is gone; returns how many."""
        count = 0
        for elicitation in await self.store.due(utcnow()):
            if await self._transition(elicitation, State.EXPIRED, None):
                count += 1
        return count

    async def pending(self, limit: int) -> list[Elicitation]:
        """Questions still pending, asked here or on any hub sharing the store, at most `limit` (the nearest deadlines
        first, where the store orders them). Some may be past their deadline, not yet expired by a sweep."""
        return await self.store.due(NO_DEADLINE, limit)  # every pending question is due by then

    async def purge(self, older_than: timedelta) -> int:
        return await self.store.purge(utcnow() - older_than)

    def pending_here(self) -> int:
        """Questions waited on here: by a task, or by a run parked here."""
        return len(self._waiters) + sum(1 for i in self._parked if i not in self._waiters)

    def park(self, elicitation_id: str, ended: Ended) -> None:
        """Tell `ended` once when the question ends, here or elsewhere, instead of a task waiting for it (a parked
        run). Nobody waits for it here, so its end is announced by whoever makes the transition."""
        self._parked[elicitation_id] = ended

    def unpark(self, elicitation_id: str) -> None:
        """The parked run no longer waits on the question (it ended, or the run let go of it)."""
        self._parked.pop(elicitation_id, None)
        self._asked.discard(elicitation_id)

    def waiters(self, elicitation_id: str) -> int:
        """How many wait here for this question."""
        return self._waiters.count(elicitation_id)

    async def cancel(self, elicitation_ids: list[str]) -> None:
        """Cancel questions that are still open (the person moved on with a new message), wherever they wait."""
        for elicitation_id in elicitation_ids:
            with contextlib.suppress(ElicitationNotFound):
                await self.end(elicitation_id, State.CANCELLED)

    async def _transition(self, elicitation: Elicitation, state: State, answer: Answer | None) -> bool:
        # Who waits is read before the write as well: a waiter that leaves while it is in flight (its wait was
        # cancelled) is still the one whose end this is, and must not be taken for nobody.
        before = self._waiters.get(elicitation.id)
        self._opened.let_go(elicitation.id)  # ended now, or (when this loses) already: an answer reads it again
        self._transitions[elicitation.id] += 1
        try:
            moved = await self.store.transition(elicitation.id, state, answer, utcnow(), elicitation)
        finally:
            self._transitions[elicitation.id] -= 1
            if self._transitions[elicitation.id] <= 0:
                del self._transitions[elicitation.id]
        if not moved:
            await self._catch_up(elicitation.id)  # another move won: its notice may have come meanwhile
            return False
        outcome = state.outcome
        self._asked.discard(elicitation.id)
        if self._counts is not None:
            self._counts.ended(elicitation, outcome)
        about = {"elicitation_id": elicitation.id, "run_id": elicitation.run_id}
        log.info(
            "elicitation %s %s",
            elicitation.id,
            outcome,
            extra={**about, "conversation_id": elicitation.conversation_id},
        )
        resolution = Resolution(
            elicitation.id, outcome, answer.content if answer else None, answer.by if answer else None
        )
        waiting = self._waiters.get(elicitation.id) or before
        if waiting is None:
            await self._announce(elicitation, resolution)
        else:
            await self._announce_once(waiting, resolution)
            if not waiting.future.done():
                waiting.future.set_result(resolution)
        if (parked := self._parked.pop(elicitation.id, None)) is not None:
            parked(elicitation.id, True)
        return True

    async def _heard(self, elicitation_id: str | None) -> None:
        """Wake the waiters here whose elicitation reached a terminal state through any process."""
        # None: listening started over, and what was resolved meanwhile was not heard. An end heard of (or maybe
        # missed) lets go of the question opened here: its wait, if one comes, reads how it ended.
        if elicitation_id is None:
            self._opened.missed()
        else:
            self._opened.ended(elicitation_id)
            self._asked.discard(elicitation_id)  # ended, maybe on another hub: no longer pending here
        everyone = [*self._waiters, *self._parked]
        for waiting in everyone if elicitation_id is None else [elicitation_id]:
            await self._catch_up(waiting)

    async def _catch_up(self, elicitation_id: str) -> None:
        if elicitation_id in self._parked and elicitation_id not in self._transitions:
            # A parked run's question ended elsewhere: its run goes on here. (A move made here resumes it when it
            # wins, and catches up when it loses.)
            stored = await self.store.get(elicitation_id)
            ended = stored is None or stored.state is not State.PENDING
            if ended and (parked := self._parked.pop(elicitation_id, None)) is not None:
                parked(elicitation_id, False)
        waiting = self._waiters.get(elicitation_id)
        if waiting is None or waiting.future.done() or elicitation_id in self._transitions:
            # Nobody waits here, or the waiters already know (this process made the transition), or will: a move
            # made here wakes them when it wins, and catches up when it loses.
            return
        stored = await self.store.get(elicitation_id)
        if stored is not None and stored.state is not State.PENDING and not waiting.future.done():
            waiting.future.set_result(Resolution.of(stored))
