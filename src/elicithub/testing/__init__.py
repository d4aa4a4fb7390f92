"""Testing MCP servers that ask: YAML suites with fixtures, the runner, byte-stable cassettes, the pytest plugin."""

from elicithub.testing.runner import Outcome, RunOptions, run_test
from elicithub.testing.suite import LoadedSuite, Suite, SuiteError, load_suite

__all__ = ["LoadedSuite", "Outcome", "RunOptions", "Suite", "SuiteError", "load_suite", "run_test"]
