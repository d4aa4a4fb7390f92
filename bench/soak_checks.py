"""What the soak checks (bench/soak.py) besides what each round saw: every question a round asked ended once, the
way it must, in the store's records (the question, and its run finished with each tool call answered once) and, for
an approval, in the audit; at the end, no run or question left waiting, and nothing provisioned twice or lost."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import httpx
from soak_rounds import APPROVER, TOKENS, Round, Tally

from elicithub.core.ports import Backend

CHECK_AFTER_S = 2.0
"""A round is checked this long after it ended: its run's last write may follow the end of its stream."""


class Checks:
    """Problems found, by kind: `lost` (a record missing, a run or question left waiting, a provision that never
    happened), `twice` (an end or a tool call made twice) and `wrong` (an outcome other than the one asked for)."""

    def __init__(self, backend: Backend, hub: str) -> None:
        self.backend = backend
        self.hub = hub
        self.http = httpx.AsyncClient(base_url=hub, headers={"authorization": f"Bearer {TOKENS[APPROVER]}"})
        self.problems: Counter[str] = Counter()
        self.checked = 0

    def found(self, kind: str, what: str) -> None:
        self.problems[f"{kind}: {what}"] += 1

    def count(self, kind: str) -> int:
        return sum(n for what, n in self.problems.items() if what.startswith(f"{kind}: "))

    async def close(self) -> None:
        await self.http.aclose()

    async def follow(self, done: asyncio.Queue[Round]) -> None:
        """Check each round as it ends, before the store forgets its records; run until cancelled."""
        while True:
            ended = await done.get()
            await asyncio.sleep(max(0.0, ended.ended + CHECK_AFTER_S - time.monotonic()))
            await self.check(ended)
            done.task_done()

    async def check(self, done: Round) -> None:
        self.checked += 1
        if done.question is None:
            return
        question = await self.backend.elicitations.get(done.question)
        if question is None:
            self.found("lost", f"{done.kind}: no record of its question")
            return
        if question.outcome != done.outcome:
            self.found("wrong", f"{done.kind}: its question ended {question.outcome}, not {done.outcome}")
        run = await self.backend.runs.get(question.run_id)
        if run is None:
            self.found("lost", f"{done.kind}: no record of its run")
        elif run.status != "finished":
            self.found("lost", f"{done.kind}: its run is {run.status}")
        else:
            results = Counter(m.get("tool_call_id") for m in run.messages if m.get("role") == "tool")
            if any(n > 1 for n in results.values()):
                self.found("twice", f"{done.kind}: a tool call has more than one result")
        if done.audit is not None:
            await self._audited(done)

    async def _audited(self, done: Round) -> None:
        since = datetime.fromtimestamp(done.started - 60, UTC).isoformat()
        response = await self.http.get(
            "/run/api/audit", params={"tool": "mrtr.inventory", "since": since, "limit": 500}
        )
        if response.status_code != 200:
            self.found("lost", f"{done.kind}: the audit answered {response.status_code}")
            return
        records = [r for r in response.json()["records"] if r["elicitationId"] == done.question]
        if not records:
            self.found("lost", f"{done.kind}: not in the audit")
        elif len(records) > 1:
            self.found("twice", f"{done.kind}: {len(records)} audit records")
        elif records[0]["outcome"] != done.audit:
            self.found("wrong", f"{done.kind}: audited {records[0]['outcome']}, not {done.audit}")

    async def finish(self, mrtr: str, tally: Tally) -> None:
        """Once every round ended: nothing waits any more, and the MCP server provisioned each accepted name once and
        no other."""
        unfinished = await self.backend.runs.unfinished()
        if unfinished:
            self.found("lost", f"{len(unfinished)} runs never finished")
        pending = await self.http.get("/run/api/admin/questions")
        questions: list[Any] = pending.json()["questions"] if pending.status_code == 200 else [None]
        if questions:
            self.found("lost", f"{len(questions)} questions still pending")
        async with httpx.AsyncClient() as http:
            provisioned: dict[str, int] = (await http.get(f"{mrtr}/debug/provisioned")).json()
        for name, times in tally.provisioned.items():
            made = provisioned.get(name, 0)
            if made > times:
                self.found("twice", f"{name} provisioned {made} times")
            elif made < times:
                self.found("lost", f"{name} never provisioned")
