"""The pytest plugin (entry point `pytest11`): every `*.elicit.yaml` file is collected, one item per YAML test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from elicithub.testing.errors import TestRunnerError
from elicithub.testing.runner import Outcome, RunOptions, run_test
from elicithub.testing.suite import LoadedSuite, SuiteError, TestSpec, load_suite

SUFFIX = ".elicit.yaml"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("elicithub", "elicithub suites (*.elicit.yaml)")
    group.addoption("--elicithub-record", metavar="DIR", type=Path, help="write one cassette per YAML test here")
    group.addoption("--elicithub-replay", metavar="DIR", type=Path, help="run YAML tests from cassettes, no server")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> SuiteFile | None:
    if file_path.name.endswith(SUFFIX):
        suite: SuiteFile = SuiteFile.from_parent(parent, path=file_path)
        return suite
    return None


class SuiteFailed(TestRunnerError):
    """A YAML test failed; `outcome` holds its reasons."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__("\n".join(outcome.failures))
        self.outcome = outcome


class SuiteFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        try:
            loaded = load_suite(self.path)
        except SuiteError as exc:
            raise self.CollectError(str(exc)) from None
        for test in loaded.suite.tests:
            yield SuiteItem.from_parent(self, name=test.name, loaded=loaded, test=test)


class SuiteItem(pytest.Item):
    def __init__(self, *, loaded: LoadedSuite, test: TestSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loaded = loaded
        self.test = test

    def runtest(self) -> None:
        config = self.config
        record, replay = config.getoption("elicithub_record"), config.getoption("elicithub_replay")
        if record is not None and replay is not None:
            raise pytest.UsageError("--elicithub-record and --elicithub-replay cannot be used together")
        options = RunOptions(record=record, replay=replay)
        outcome = anyio.run(run_test, self.loaded, self.test, options)
        if not outcome.passed:
            raise SuiteFailed(outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, SuiteFailed):
            reasons = "\n".join("  " + f.replace("\n", "\n  ") for f in excinfo.value.outcome.failures)
            return f"{self.path.name}::{self.name} failed:\n{reasons}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name
