"""The in-process backend's runs."""

from __future__ import annotations

from dataclasses import replace

from elicithub.core.runs import RunRecord


class MemoryRuns:
    """Runs of one process: any owner but the current one is gone (a restart), so nobody else is alive."""

    def __init__(self) -> None:
        self._items: dict[str, RunRecord] = {}

    async def save(self, record: RunRecord) -> None:
        self._items[record.run_id] = record

    async def get(self, run_id: str) -> RunRecord | None:
        return self._items.get(run_id)

    async def claim(self, run_id: str, expected_owner: str, owner: str) -> bool:
        record = self._items.get(run_id)
        if record is None or record.owner != expected_owner:
            return False
        self._items[run_id] = replace(record, owner=owner)
        return True

    async def unfinished(self, other_than: str = "", limit: int = 1000) -> list[RunRecord]:
        return [r for r in self._items.values() if r.status != "finished" and r.owner != other_than][:limit]

    async def purge(self, finished_before: float) -> int:
        old = [k for k, r in self._items.items() if r.status == "finished" and r.updated_at < finished_before]
        for key in old:
            del self._items[key]
        return len(old)

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        return None

    async def alive(self, owner: str) -> bool:
        return False
