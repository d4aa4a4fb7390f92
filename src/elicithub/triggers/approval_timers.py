"""An approval's reminder and escalation notices: timers on the store every hub shares, so they survive a restart
(or a hub killed outright) and fire exactly once across hubs.

Each timer is an entry of one list (`approval-timers`, `{"id", "kind", "due"}`, kept until its approval's deadline)
and a key of its own (`approval-timer:ID:KIND`). Every hub's sweep reads the list; for each timer due, it takes the
key, and only the one hub whose take gets it fires the notice (when the approval is still open). Escalation itself
needs no timer: an approval is answerable by those it escalates to once its time has come (core/approval.py); the
timer only tells them.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime
from typing import Literal

from elicithub.core.approval import People
from elicithub.core.elicitation import Elicitation, State, utcnow
from elicithub.core.ports import ElicitationStore, Entry, KeyValueStore
from elicithub.runtime.approvers import ApprovalNotices, asked_of

log = logging.getLogger(__name__)

LIST = "approval-timers"
PAGE = 500
MARGIN_S = 60.0
"""How long a timer is kept past its approval's deadline (a sweep running late still finds it, and finds it ended)."""

Kind = Literal["remind", "escalate"]


class ApprovalTimers:
    def __init__(self, kv: KeyValueStore, store: ElicitationStore, notices: ApprovalNotices) -> None:
        self.kv = kv
        self.store = store
        self.notices = notices

    async def schedule(self, elicitation: Elicitation, kind: Kind, due: datetime) -> None:
        """Fire `kind` at `due` for the approval (stored before it is; one never stored fires nothing)."""
        keep_s = (elicitation.expires_at - utcnow()).total_seconds() + MARGIN_S
        await self.kv.put(_key(elicitation.id, kind), b"1", keep_s)
        timer = json.dumps({"id": elicitation.id, "kind": kind, "due": due.timestamp()}, separators=(",", ":"))
        await self.kv.add_entry(LIST, timer, keep_s)

    async def fire_due(self) -> int:
        """Fire every timer due that no hub has fired yet (the sweep's); how many fired here."""
        now = time.time()
        fired = 0
        before: Entry | None = None
        while True:
            page = await self.kv.entries(LIST, PAGE, before)
            for entry in page:
                timer = json.loads(entry.value)
                if timer["due"] <= now and await self.kv.take(_key(timer["id"], timer["kind"])) is not None:
                    fired += await self._fire(timer["id"], timer["kind"])
            if len(page) < PAGE:
                return fired
            before = page[-1]

    async def _fire(self, elicitation_id: str, kind: Kind) -> int:
        elicitation = await self.store.get(elicitation_id)
        if elicitation is None or elicitation.state is not State.PENDING or elicitation.approval is None:
            return 0  # it ended before its time: nobody needs telling
        if kind == "remind":
            await self.notices.reminded(elicitation, asked_of(elicitation))
        else:
            escalate_to = elicitation.approval.escalate_to
            await self.notices.escalated(elicitation, escalate_to or People())
        return 1


def _key(elicitation_id: str, kind: str) -> str:
    return f"approval-timer:{elicitation_id}:{kind}"
