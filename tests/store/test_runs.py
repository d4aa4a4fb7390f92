"""Run records on every backend: saved and read back, taken over exactly once, listed until finished."""

from __future__ import annotations

import anyio
import pytest

from elicithub.core.ports import Backend, RunStore
from elicithub.core.runs import Pause, RunRecord, ToolCall
from elicithub.store.redis.runs import RedisRuns

pytestmark = pytest.mark.anyio


@pytest.fixture
def runs(backend: Backend) -> RunStore:
    return backend.runs


def record(run_id: str = "run_1", owner: str = "hub_a") -> RunRecord:
    state = {"kind": "mrtr", "request_state": "sealed", "input_requests": {"inputRequests": {}}, "rounds": 1}
    return RunRecord(
        run_id=run_id,
        conversation_id="run_1",
        user_id="alice",
        supports_elicitation=True,
        messages=[{"role": "user", "content": "/call mrtr.provision {}"}],
        parent_run_id="run_parent",
        tool_calls=[ToolCall("call_1", "mrtr.provision", {"name": "orders"})],
        pause=Pause("mcp", {"region": "eli_1"}, state),
        status="paused",
        owner=owner,
    )


async def test_a_record_reads_back_whole(runs: RunStore) -> None:
    await runs.save(record())
    assert await runs.get("run_1") == record()
    assert await runs.get("run_unknown") is None


async def test_only_one_of_many_claimants_takes_a_run_over(runs: RunStore) -> None:
    await runs.save(record())
    results: list[bool] = []

    async def claim(owner: str) -> None:
        results.append(await runs.claim("run_1", "hub_a", owner))

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(claim, f"hub_{i}")
    assert results.count(True) == 1
    winner = await runs.get("run_1")
    assert winner is not None and winner.owner != "hub_a"
    assert not await runs.claim("run_1", "hub_a", "hub_late")  # the expected owner is no longer there


async def test_finished_runs_are_no_longer_listed(runs: RunStore) -> None:
    await runs.save(record("run_1"))
    await runs.save(record("run_2"))
    await runs.save(record("run_2").with_(status="finished", pause=None))
    assert [r.run_id for r in await runs.unfinished()] == ["run_1"]
    assert await runs.unfinished(other_than="hub_a") == []  # its own runs are not what a hub looks for


async def test_liveness(backend: Backend, runs: RunStore) -> None:
    await runs.heartbeat("hub_a", 60)
    if backend.shared:
        assert await runs.alive("hub_a")
        await runs.heartbeat("hub_a", 0.05)  # its last beat: it lapses soon after
        with anyio.fail_after(10):
            while await runs.alive("hub_a"):  # noqa: ASYNC110 - the store has no event for a lapse
                await anyio.sleep(0.01)
    assert not await runs.alive("hub_a")  # memory and SQLite belong to one process: any other owner is gone
    assert not await runs.alive("hub_never")


async def test_finished_runs_are_forgotten_after_a_while(runs: RunStore) -> None:
    await runs.save(record("run_old").with_(status="finished", pause=None))
    await runs.save(record("run_open"))
    old = await runs.get("run_old")
    assert old is not None
    if isinstance(runs, RedisRuns):
        ttl = await runs._redis.ttl("elicithub:run:run_old")
        assert 0 < ttl <= 24 * 3600  # Redis expires it by itself
        return
    assert await runs.purge(old.updated_at - 1) == 0
    assert await runs.purge(old.updated_at + 1) == 1
    assert await runs.get("run_old") is None and await runs.get("run_open") is not None
