"""Waiting for a question to end: its waiters here share one future, and the last to leave takes the entry away."""

from __future__ import annotations

import pytest

from elicithub.core.waiting import Resolution, Waiters
from tests.core_fixtures import question

pytestmark = pytest.mark.anyio  # the future is made on the running loop


async def test_the_waiters_of_one_question_share_one_future_until_the_last_leaves() -> None:
    waiters = Waiters()
    e = question()
    with waiters.join(e) as first:
        with waiters.join(e) as second:
            assert second is first
            assert waiters.count(e.id) == 2
        assert waiters.count(e.id) == 1
        assert e.id in waiters
        first.future.set_result(Resolution(e.id, "accepted"))
    assert e.id not in waiters
    assert waiters.count(e.id) == 0
    assert list(waiters) == []


async def test_a_waiter_that_gives_up_leaves_the_others_waiting() -> None:
    waiters = Waiters()
    e = question()
    with waiters.join(e) as staying:
        try:
            with waiters.join(e):
                raise TimeoutError
        except TimeoutError:
            pass
        assert waiters.get(e.id) is staying
        assert not staying.future.done()
