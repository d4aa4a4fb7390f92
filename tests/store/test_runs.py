"""Run records on every backend: saved and read back, taken over exactly once, listed until finished."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from elicithub.runtime.redis_runs import RedisRuns
from elicithub.runtime.runs import MemoryRuns, Pause, RunRecord, RunStore, SqliteRuns

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def runs(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunStore]:
    if request.param == "redis":
        store: RunStore = RedisRuns(request.getfixturevalue("redis_url"))
    elif request.param == "sqlite":
        store = SqliteRuns(tmp_path / "hub.db")
    else:
        store = MemoryRuns()
    yield store
    await store.close()


def record(conversation_id: str = "conv_1", owner: str = "hub_a") -> RunRecord:
    return RunRecord(
        conversation_id=conversation_id,
        user_id="alice",
        stream_id="stream_1",
        supports_elicitation=True,
        messages=[{"role": "user", "content": "/call mrtr.provision {}"}],
        tool_calls=[{"id": "call_1", "name": "mrtr.provision", "arguments": {"name": "orders"}}],
        pause=Pause("mrtr", {"region": "eli_1"}, request_state="sealed", input_requests={"inputRequests": {}}),
        status="paused",
        owner=owner,
    )


async def test_a_record_reads_back_whole(runs: RunStore) -> None:
    await runs.save(record())
    assert await runs.get("conv_1") == record()
    assert await runs.get("conv_unknown") is None


async def test_only_one_of_many_claimants_takes_a_run_over(runs: RunStore) -> None:
    await runs.save(record())
    results: list[bool] = []

    async def claim(owner: str) -> None:
        results.append(await runs.claim("conv_1", "hub_a", owner))

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(claim, f"hub_{i}")
    assert results.count(True) == 1
    winner = await runs.get("conv_1")
    assert winner is not None and winner.owner != "hub_a"
    assert not await runs.claim("conv_1", "hub_a", "hub_late")  # the expected owner is no longer there


async def test_finished_runs_are_no_longer_listed(runs: RunStore) -> None:
    await runs.save(record("conv_1"))
    await runs.save(record("conv_2"))
    await runs.save(record("conv_2").with_(status="finished", pause=None))
    assert [r.conversation_id for r in await runs.unfinished()] == ["conv_1"]
    assert await runs.unfinished(other_than="hub_a") == []  # its own runs are not what a hub looks for


async def test_liveness(runs: RunStore) -> None:
    await runs.heartbeat("hub_a", 0.3)
    if isinstance(runs, RedisRuns):
        assert await runs.alive("hub_a")
        await anyio.sleep(0.5)
    assert not await runs.alive("hub_a")  # memory and SQLite belong to one process: any other owner is gone
    assert not await runs.alive("hub_never")


async def test_finished_runs_are_forgotten_after_a_while(runs: RunStore) -> None:
    await runs.save(record("conv_old").with_(status="finished", pause=None))
    await runs.save(record("conv_open"))
    old = await runs.get("conv_old")
    assert old is not None
    if isinstance(runs, RedisRuns):
        ttl = await runs._redis.ttl("elicithub:run:conv_old")
        assert 0 < ttl <= 24 * 3600  # Redis expires it by itself
        return
    assert await runs.purge(old.updated_at - 1) == 0
    assert await runs.purge(old.updated_at + 1) == 1
    assert await runs.get("conv_old") is None and await runs.get("conv_open") is not None
