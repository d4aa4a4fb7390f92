"""The test runner's own error tree: a suite, a cassette or a server under test that fails a test.

These are kept apart from `elicithub.errors.HubError`, whose errors are the hub's; each class lives beside the
code that raises it:

* TestRunnerError
  + SuiteError (testing.suite)
  + CassetteError (testing.cassette)
  + TestFailure (testing.answers)
  + SuiteFailed (testing.plugin)
"""

from __future__ import annotations


class TestRunnerError(Exception):
    """Anything that stops a suite or fails one of its tests; the message says why, in terms of the suite."""

    __test__ = False  # not a pytest test class, whatever its name
