"""A conversation's event log as runs write it and readers follow it, from any instance."""

from __future__ import annotations

from collections.abc import AsyncIterator

from elicithub.core.elicitation import Elicitation
from elicithub.core.events import ElicitationResolved, Logged, RunFinished, StreamEvent, event_of
from elicithub.core.ports import EventLog
from elicithub.core.runs import conversation_key

WAIT_S = 30.0
"""How long one read of the log blocks before it is made again (a reader's keep-alives go on meanwhile)."""


class RunStream:
    """Writes each run's events to its conversation's log, tagged with the run, and follows one run's events."""

    def __init__(self, log: EventLog) -> None:
        self.log = log

    async def emit(self, key: str, run_id: str, event: StreamEvent) -> None:
        """Written behind: the run goes on at once. What it stored before emitting (a pause, a question) is stored
        before any reader can see the event."""
        self.post(key, run_id, event)

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

    async def follow(self, key: str, run_id: str, after: int) -> AsyncIterator[tuple[int, StreamEvent]]:
        """The run's events after position `after`, as they come, up to and including its RunFinished.

        An end of a question can be announced twice (by the instance that took the answer and by the one whose
        run waited); readers get the first.
        """
        announced: set[str] = set()
        while True:
            for seq, data in await self.log.wait(key, after, WAIT_S):
                after = seq
                if data.get("run") != run_id:
                    continue
                event = event_of(data)
                if event is None:
                    continue
                if isinstance(event, ElicitationResolved):
                    if event.elicitation_id in announced:
                        continue
                    announced.add(event.elicitation_id)
                yield seq, event
                if isinstance(event, RunFinished):
                    return
