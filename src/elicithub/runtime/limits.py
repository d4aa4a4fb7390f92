"""The limits: what one person may start (runs a minute, runs at once, questions waiting), counted in the store so that
the hubs sharing it hold them together, and how many runs this hub holds before it sheds new ones. Only what starts a
run comes through here: an answer to an open question never does, so a person answering always gets through."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from elicithub.config import LimitsConfig
from elicithub.core.elicitation import Elicitation, new_id, utcnow
from elicithub.core.events import ElicitationRequested, ElicitationResolved, StreamEvent
from elicithub.core.ports import EventSink, Held, KeyValueStore
from elicithub.core.runs import RunRecord
from elicithub.errors import Overloaded, RateLimited

if TYPE_CHECKING:
    from elicithub.runtime.conversations import Caller

log = logging.getLogger(__name__)

PREFIX = "limits:"
WINDOW_S = 60.0
"""`requests_per_minute` counts the requests of the last 60 s (each holds its place that long)."""
RUN_HOLD_S = 24 * 3600.0
"""How long a run holds its place at most: one whose every hub was lost for good stops counting then."""
RUNS_RETRY_S = 5
"""Retry-After past `active_runs`: runs end on their own, most within seconds."""
QUESTIONS_RETRY_S = 30
"""Retry-After past `pending_questions`: those questions wait on people, who take a while."""
OVERLOADED_RETRY_S = 1
"""Retry-After of a hub that sheds: a moment later, or another hub, may take it."""


def anonymous_identities(secret: str | None, address: str | None) -> tuple[str, ...]:
    """Whom an anonymous caller's requests count against: the secret of the cookie they sent (hashed: the store's
    keys are not secrets), and their address."""
    found = []
    if secret is not None:
        found.append("anonymous:" + hashlib.sha256(secret.encode()).hexdigest()[:32])
    if address is not None:
        found.append(f"address:{address}")
    return tuple(found)


class Limits:
    """`config`'s limits over the store's sets (`KeyValueStore.hold`); `refused(limit)` hears of every refusal (the
    metrics)."""

    def __init__(self, config: LimitsConfig, kv: KeyValueStore, refused: Callable[[str], None] = lambda _: None):
        self.config = config
        self.kv = kv
        self._refused = refused
        self._starting = 0
        """Runs being started now, not yet among those the hub holds: each counts toward `max_active_runs`."""

    @property
    def counts_questions(self) -> bool:
        return self.config.per_user.pending_questions is not None

    def shed(self, running: int) -> None:
        """Refuse a new run at once (Overloaded) when this hub, holding `running` runs and starting others, is at
        `max_active_runs`."""
        ceiling = self.config.max_active_runs
        if ceiling is not None and running + self._starting >= ceiling:
            self._refused("max_active_runs")
            raise Overloaded(
                f"This hub holds as many runs as it may ({ceiling}, limits.max_active_runs).", OVERLOADED_RETRY_S
            )

    @contextlib.asynccontextmanager
    async def admission(self, caller: Caller, run_id: str, running: int) -> AsyncIterator[list[str]]:
        """A new run for `caller` while this hub holds `running` runs: shed at once (Overloaded) past
        `max_active_runs`, before any store work; else refused (RateLimited) past a per-user limit, or admitted. The
        block gets the keys of the sets that hold the run's place (its record keeps them, so that whichever hub
        finishes it lets them go), and starts the run; if it fails, the run's places are let go. Until the block
        ends the run counts toward `max_active_runs` as one being started."""
        self.shed(running)
        self._starting += 1
        try:
            held = await self._admit(caller, run_id)
            try:
                yield held
            except BaseException:
                await self._let_go(run_id, held)
                raise
        finally:
            self._starting -= 1

    async def _admit(self, caller: Caller, run_id: str) -> list[str]:
        limits = self.config.per_user
        who = [f"user:{caller.user_id}"] if caller.user_id is not None else list(caller.counted_as)
        rate = [f"{PREFIX}rate:{w}" for w in who] if limits.requests_per_minute is not None else []
        runs = [f"{PREFIX}runs:{w}" for w in who] if limits.active_runs is not None else []
        asked = [questions_key(caller.user_id)] if limits.pending_questions and caller.user_id is not None else []
        # All at once, one round trip to the store: a request refused for another reason still counts toward the
        # requests of the minute (one refused by that count does not).
        holds = await asyncio.gather(
            *(self.kv.hold(key, new_id("req"), WINDOW_S, limits.requests_per_minute) for key in rate),
            *(self.kv.hold(key, run_id, RUN_HOLD_S, limits.active_runs) for key in runs),
            *(self.kv.holding(key) for key in asked),
        )
        rated, placed, waiting = (
            holds[: len(rate)],
            holds[len(rate) : len(rate) + len(runs)],
            holds[len(rate) + len(runs) :],
        )
        refusal = (
            _over_rate(rated, limits.requests_per_minute)
            or _over_runs(placed, limits.active_runs)
            or _over_questions(waiting, limits.pending_questions)
        )
        if refusal is not None:
            await self._let_go(run_id, [key for key, held in zip(runs, placed, strict=True) if held.taken])
            self._refused(refusal.limit)
            raise refusal
        return runs

    async def release(self, run: RunRecord) -> None:
        """The run has finished: the places it held are free (a failure to say so leaves them to lapse)."""
        await self._let_go(run.run_id, run.limited_as)

    async def _let_go(self, run_id: str, keys: list[str]) -> None:
        try:
            await asyncio.gather(*(self.kv.release(key, run_id) for key in keys))
        except Exception:
            log.exception("letting go of run %s's places failed; they lapse in %g s", run_id, RUN_HOLD_S)

    def questions(self, sink: EventSink) -> EventSink:
        """`sink`, counting each user's open questions on the way when `pending_questions` is on."""
        return CountedQuestions(sink, self.kv) if self.counts_questions else sink


def questions_key(user_id: str) -> str:
    return f"{PREFIX}questions:user:{user_id}"


def _over_rate(held: list[Held], limit: int | None) -> RateLimited | None:
    refused = [h for h in held if not h.taken]
    if not refused:
        return None
    # The place of the first of the minute's requests frees when it lapses.
    wait_ms = max(h.first_end_ms for h in refused) - time.time() * 1000
    return RateLimited(
        "requests_per_minute",
        f"You sent {limit} requests that start a run in the last minute, as many as may "
        "(limits.per_user.requests_per_minute).",
        max(1, math.ceil(wait_ms / 1000)),
    )


def _over_runs(held: list[Held], limit: int | None) -> RateLimited | None:
    if all(h.taken for h in held):
        return None
    return RateLimited(
        "active_runs",
        f"You have {limit} runs going or waiting on questions, as many as may (limits.per_user.active_runs).",
        RUNS_RETRY_S,
    )


def _over_questions(held: list[Held], limit: int | None) -> RateLimited | None:
    if not held or held[0].members < (limit or 0):
        return None
    return RateLimited(
        "pending_questions",
        f"{held[0].members} of your questions wait for an answer, as many as may (limits.per_user.pending_questions);"
        " answer some first.",
        QUESTIONS_RETRY_S,
    )


class CountedQuestions:
    """The broker's sink, counting each user's open questions (across hubs) on the way: a question shown holds its
    place until its deadline, and its end lets it go. Shown again (a resumed run) it holds it once still."""

    def __init__(self, sink: EventSink, kv: KeyValueStore) -> None:
        self.sink = sink
        self.kv = kv

    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
        counted: list[Awaitable[object]] = []
        if elicitation.user_id is not None:
            key = questions_key(elicitation.user_id)
            if isinstance(event, ElicitationRequested):
                left_s = (elicitation.expires_at - utcnow()).total_seconds()
                counted = [self.kv.hold(key, elicitation.id, left_s)] if left_s > 0 else []
            elif isinstance(event, ElicitationResolved):
                counted = [self.kv.release(key, elicitation.id)]
        await asyncio.gather(self.sink.publish(elicitation, event), *counted)
