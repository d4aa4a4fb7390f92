"""Suites written on the fly against the test servers (HTTP and stdio, both eras), run in this process."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from elicithub.testing.runner import Outcome, RunOptions, run_test
from elicithub.testing.suite import load_suite
from tests.conftest import SERVERS

DEMO = Path(__file__).parent.parent / "elicit" / "demo_servers.py"
LEGACY_STDIO = f"command: [python, {SERVERS / 'legacy_server.py'}, stdio]"
DEPLOY_STDIO = f"command: [python, {DEMO}, deploy]"

PASS_AND_FAIL = """
- name: deploys
  call: {tool: deploy_service, arguments: {service: orders}}
  inputResponses:
    deploy: {content: {region: eu-west-1, confirm: true}}
  expect: {text_contains: eu-west-1}
- name: expects the wrong region
  call: {tool: deploy_service, arguments: {service: orders}}
  inputResponses:
    deploy: {content: {region: eu-west-1, confirm: true}}
  expect: {text_contains: us-east-1}
"""
"""Two tests against the demo deploy server: one passes, one fails."""

SuiteFactory = Callable[..., Path]


@pytest.fixture
def write_suite(tmp_path: Path) -> SuiteFactory:
    """Write a suite: `server` is the flow mapping's inside, `tests` the YAML of the test list."""

    def write(server: str, tests: str, name: str = "flow.elicit.yaml", head: str = "") -> Path:
        path = tmp_path / name
        path.write_text(f"server: {{{server}}}\n{head}tests:\n{textwrap.indent(textwrap.dedent(tests), '  ')}")
        return path

    return write


def run_suite(path: Path, **options: Any) -> list[Outcome]:
    loaded = load_suite(path)

    async def all_tests() -> list[Outcome]:
        return [await run_test(loaded, test, RunOptions(**options)) for test in loaded.suite.tests]

    return anyio.run(all_tests)
