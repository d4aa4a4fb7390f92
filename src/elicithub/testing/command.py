"""`elicithub test`: load the suites, run the chosen tests one by one, report, and give the exit status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from elicithub.clients.prompt import Terminal, is_terminal
from elicithub.core.elicitation import Answer
from elicithub.testing.answers import Asked, Person
from elicithub.testing.report import progress, summary, write_junit
from elicithub.testing.runner import Outcome, RunOptions, run_test
from elicithub.testing.suite import LoadedSuite, SuiteError, load_suite

PASSED, FAILED, UNUSABLE = 0, 1, 2


@dataclass(frozen=True)
class Request:
    paths: list[Path]
    record: Path | None = None
    replay: Path | None = None
    interactive: bool = False
    junit: Path | None = None
    pattern: str | None = None


def person_at(terminal: Terminal) -> Person:
    """Questions no fixture answers, asked at the terminal (the prompt re-asks until the answer is valid)."""

    async def ask(asked: Asked) -> Answer:
        terminal.write(f"\nNo fixture answers question {asked.key or '#' + str(asked.round)}; asking you.")
        if asked.mode == "url":
            return terminal.url(asked.message, asked.url or "")
        return terminal.form(asked.message, asked.schema or {})

    return ask


def selected(loaded: LoadedSuite, pattern: str | None) -> list[str]:
    """The names of the tests `-k` keeps: a case-insensitive substring of the name."""
    return [t.name for t in loaded.suite.tests if pattern is None or pattern.lower() in t.name.lower()]


def run(request: Request, say: Callable[[str], None] = print) -> int:
    if request.record is not None and request.replay is not None:
        say("error: --record and --replay cannot be used together")
        return UNUSABLE
    try:
        suites = [load_suite(path) for path in request.paths]
    except SuiteError as exc:
        say(f"error: {exc}")
        return UNUSABLE
    person: Person | None = None
    if request.interactive:
        if is_terminal():
            person = person_at(Terminal())
        else:
            say("--interactive: stdin is not a terminal, so questions without a fixture fail instead")
    options = RunOptions(record=request.record, replay=request.replay, person=person)
    outcomes: list[Outcome] = []

    async def all_tests() -> None:
        for loaded in suites:
            names = selected(loaded, request.pattern)
            for test in loaded.suite.tests:
                if test.name in names:
                    outcome = await run_test(loaded, test, options)
                    say(progress(outcome))
                    outcomes.append(outcome)

    anyio.run(all_tests)
    say(summary(outcomes))
    if request.junit is not None:
        write_junit(request.junit, outcomes, say)
    return PASSED if all(o.passed for o in outcomes) else FAILED
