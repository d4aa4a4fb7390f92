"""What a broker remembers of the questions opened in its process: which nobody waits on yet, and their copies."""

from __future__ import annotations

from datetime import timedelta

import pytest

from elicithub.core import opened
from elicithub.core.elicitation import utcnow
from elicithub.core.opened import Opened
from tests.core_fixtures import question


def test_a_wait_reads_again_unless_the_question_was_opened_here_with_no_notice_since() -> None:
    memory = Opened()
    memory.note("e_1")
    assert memory.waited("e_2")  # not opened here
    assert not memory.waited("e_1")  # opened here, and no notice told of its end
    assert memory.waited("e_1")  # a second wait: the first one let go of it


def test_a_notice_of_an_end_or_a_missed_one_makes_the_wait_read_again() -> None:
    memory = Opened()
    memory.note("e_1")
    memory.note("e_2")
    memory.ended("e_1")
    assert memory.waited("e_1")
    memory.missed()  # listening started over: any may have ended unheard
    assert memory.waited("e_2")


def test_the_oldest_questions_opened_are_forgotten_beyond_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opened, "KEPT_OPENED", 2)
    memory = Opened()
    first, second, third = question(), question(), question()
    for e in (first, second, third):
        memory.note(e.id)
        memory.hold((e,))
    assert memory.waited(first.id)  # forgotten: its wait reads it
    assert memory.held(first.id) is None
    assert not memory.waited(third.id)
    assert memory.held(third.id) is third


def test_a_copy_past_its_deadline_is_let_go_when_the_next_is_held() -> None:
    memory = Opened()
    late = question(at=utcnow() - timedelta(seconds=120))  # made two minutes ago, open for one
    memory.hold((late,))
    assert memory.held(late.id) is late  # kept until more are held
    fresh = question()
    memory.hold((fresh,))
    assert memory.held(late.id) is None  # an answer to it now reads it, and expires it
    assert memory.held(fresh.id) is fresh


def test_a_question_that_ends_is_no_longer_held_nor_remembered() -> None:
    memory = Opened()
    e = question()
    memory.note(e.id)
    memory.hold((e,))
    assert e.id in memory
    memory.let_go(e.id)
    assert memory.held(e.id) is None
    memory.ended(e.id)
    assert e.id not in memory
