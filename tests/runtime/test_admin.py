"""An admin's questions without HTTP: every user's open ones (their run's surface, newest first, filtered), and
cancelling one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, Elicitation, State, utcnow
from elicithub.core.ports import Backend
from elicithub.core.runs import RunRecord
from elicithub.core.waiting import Resolution
from elicithub.errors import AlreadyResolved, ElicitationNotFound, Expired
from elicithub.runtime.admin import AdminQuestions
from elicithub.store import open_backend
from tests.core_fixtures import BusSink, question

pytestmark = pytest.mark.anyio


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    opened = open_backend("memory://")
    yield opened
    await opened.close()


@pytest.fixture
async def broker(backend: Backend) -> AsyncIterator[Broker]:
    started = Broker(backend.elicitations, BusSink())
    await started.start()
    yield started
    await started.close()


@pytest.fixture
def admin(broker: Broker, backend: Backend) -> AdminQuestions:
    return AdminQuestions(broker, backend.runs)


async def asked(backend: Backend, elicitation: Elicitation, surface: str | None = "chat") -> Elicitation:
    """Store a question, and its run on `surface` (None: no run on record)."""
    if surface is not None:
        run = RunRecord(elicitation.run_id, elicitation.conversation_id, elicitation.user_id, True, [], surface=surface)
        await backend.runs.save(run)
    await backend.elicitations.put(elicitation)
    return elicitation


def minutes_ago(minutes: float) -> dict[str, Any]:
    """Asked that long ago, open for an hour."""
    return {"at": utcnow() - timedelta(minutes=minutes), "timeout_s": 3600}


async def test_open_questions_are_every_users_newest_first_with_the_surface_of_their_run(
    backend: Backend, admin: AdminQuestions
) -> None:
    oldest = await asked(backend, question(**minutes_ago(3)), "slack")
    newest = await asked(backend, question(user_id="bob", **minutes_ago(1)), "mcp")
    middle = await asked(backend, question(**minutes_ago(2)), None)
    listed = [(q.elicitation.id, q.surface) for q in await admin.open()]
    assert listed == [(newest.id, "mcp"), (middle.id, None), (oldest.id, "slack")]


async def test_filters_take_the_user_the_server_or_agent_and_the_age(backend: Backend, admin: AdminQuestions) -> None:
    deploy = await asked(backend, question(**minutes_ago(10)))
    travel = question(user_id="bob", context={"trigger": "a2a_input_required", "agentId": "travel", "taskId": "t1"})
    travel = await asked(backend, travel, "a2a")

    async def ids(**filters: Any) -> list[str]:
        return [q.elicitation.id for q in await admin.open(**filters)]

    assert await ids(user="alice") == [deploy.id]
    assert await ids(server="travel") == [travel.id]
    assert await ids(server="deploy", user="bob") == []
    assert await ids(older_than_s=300) == [deploy.id]
    assert await ids(older_than_s=0) == [travel.id, deploy.id]


async def test_a_question_past_its_deadline_is_not_listed_and_cancelling_it_expires_it(
    backend: Backend, admin: AdminQuestions
) -> None:
    overdue = await asked(backend, question(timeout_s=-5))  # its waiter is gone; no sweep has ended it yet
    assert await admin.open() == []
    with pytest.raises(Expired):
        await admin.cancel(overdue.id, "carol")
    stored = await backend.elicitations.get(overdue.id)
    assert stored is not None and stored.state is State.EXPIRED


async def test_cancel_ends_an_open_question_once_and_refuses_one_that_ended(
    backend: Backend, broker: Broker, admin: AdminQuestions
) -> None:
    waiting, answered = await asked(backend, question()), await asked(backend, question())
    assert await admin.cancel(waiting.id, "carol") == Resolution(waiting.id, "cancelled")
    with pytest.raises(AlreadyResolved, match=r"was already cancelled\.$"):
        await admin.cancel(waiting.id, "carol")
    await broker.respond(answered.id, Answer("decline"), "alice")
    with pytest.raises(AlreadyResolved, match=r"was already declined\.$"):
        await admin.cancel(answered.id, "carol")
    with pytest.raises(ElicitationNotFound):
        await admin.cancel("eli_unknown", "carol")
    assert await admin.open() == []
