"""The run stream over a real event log: what a reader on the hub that wrote an event gets back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from elicithub.core.events import ElicitationRequested, RunFinished, StreamEvent, TextDelta, to_json
from elicithub.core.ports import Backend
from elicithub.runtime.stream import RunStream
from elicithub.store import open_backend
from tests.core_fixtures import question

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    opened = open_backend("memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'hub.db'}")
    await opened.open()
    yield opened
    await opened.close()


async def followed(stream: RunStream, key: str, run_id: str) -> list[StreamEvent]:
    return [event async for _, event in stream.follow(key, run_id, 0)]


async def test_a_reader_on_the_hub_that_wrote_an_event_gets_that_event_not_a_copy(backend: Backend) -> None:
    stream = RunStream(backend.events)
    asked = ElicitationRequested(question(run_id="run_1"))
    written: list[StreamEvent] = [TextDelta("hello"), asked, RunFinished()]
    for event in written:
        await stream.emit("conv", "run_1", event)
    read = await followed(stream, "conv", "run_1")
    assert read == written
    assert all(got is sent for got, sent in zip(read, written, strict=True))  # no decoding on the way


async def test_an_event_another_hub_wrote_is_decoded_from_its_json(backend: Backend) -> None:
    """What a store hands back as plain JSON (another hub's append, a restart) still reads as the event."""
    asked = ElicitationRequested(question(run_id="run_1"))
    for event in [asked, RunFinished()]:
        await backend.events.append("conv", {"run": "run_1", **to_json(event)})
    read = await followed(RunStream(backend.events), "conv", "run_1")
    assert read == [asked, RunFinished()]
    assert read[0] is not asked
