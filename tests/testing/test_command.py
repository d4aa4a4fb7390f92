"""`elicithub test` as a command: progress, summary, exit status, JUnit XML, -k, and --interactive on a terminal
(pseudo-terminal) and off one (never waits)."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pexpect

from tests.testing.conftest import DEPLOY_STDIO, PASS_AND_FAIL, SuiteFactory

UNANSWERED = """
- name: asks the person
  call: {tool: deploy_service, arguments: {service: orders}}
  expect: {text_equals: Deployed orders to us-east-1 with 3 replicas (tracing).}
"""


def elicithub(*args: str | Path, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "elicithub.cli", *map(str, args)]
    return subprocess.run(command, stdin=stdin, capture_output=True, text=True, check=False)


def test_a_run_prints_a_line_per_test_a_summary_and_fails_when_a_test_fails(
    write_suite: SuiteFactory, tmp_path: Path
) -> None:
    path = write_suite(DEPLOY_STDIO, PASS_AND_FAIL)
    done = elicithub("test", path, "--junit", tmp_path / "out" / "junit.xml")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == "PASS flow.elicit.yaml::deploys (1 round)"
    assert lines[1] == "FAIL flow.elicit.yaml::expects the wrong region"
    assert lines[2] == "  text does not contain 'us-east-1'; it is 'Deployed orders to eu-west-1 with 2 replicas.'"
    assert lines[3:] == ["1 passed, 1 failed", f"JUnit XML written to {tmp_path / 'out' / 'junit.xml'}"]

    root = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    assert root.tag == "testsuites" and (root.get("tests"), root.get("failures")) == ("2", "1")
    [suite] = root
    assert (suite.tag, suite.get("name"), suite.get("tests"), suite.get("failures")) == (
        "testsuite",
        path.name,
        "2",
        "1",
    )
    passed, failed = suite
    assert (passed.get("classname"), passed.get("name"), list(passed)) == ("flow", "deploys", [])
    [failure] = failed
    assert failure.tag == "failure" and failure.get("message", "").startswith("text does not contain 'us-east-1'")


def test_k_selects_tests_by_name_and_a_passing_run_exits_0(write_suite: SuiteFactory) -> None:
    done = elicithub("test", write_suite(DEPLOY_STDIO, PASS_AND_FAIL), "-k", "DEPLOYS")
    assert (done.returncode, done.stdout.splitlines()) == (
        0,
        ["PASS flow.elicit.yaml::deploys (1 round)", "1 passed, 0 failed"],
    )


def test_an_unusable_suite_or_request_exits_2(write_suite: SuiteFactory, tmp_path: Path) -> None:
    bad = write_suite("url: nope", PASS_AND_FAIL)
    done = elicithub("test", bad)
    assert done.returncode == 2
    assert "server.url (line 1): String should match pattern" in done.stdout
    both = elicithub("test", write_suite(DEPLOY_STDIO, PASS_AND_FAIL), "--record", tmp_path, "--replay", tmp_path)
    assert (both.returncode, both.stdout) == (2, "error: --record and --replay cannot be used together\n")


def test_interactive_off_a_terminal_never_waits_and_fails_naming_the_question(write_suite: SuiteFactory) -> None:
    done = elicithub("test", write_suite(DEPLOY_STDIO, UNANSWERED), "--interactive")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == "--interactive: stdin is not a terminal, so questions without a fixture fail instead"
    assert lines[1] == "FAIL flow.elicit.yaml::asks the person"
    assert lines[2].startswith("  no fixture answers question 'deploy' ('How should orders be deployed?'); schema: {")


def test_interactive_off_a_terminal_still_uses_the_fixtures(write_suite: SuiteFactory) -> None:
    done = elicithub("test", write_suite(DEPLOY_STDIO, PASS_AND_FAIL), "--interactive", "-k", "deploys")
    assert done.returncode == 0 and "PASS flow.elicit.yaml::deploys (1 round)" in done.stdout


def test_interactive_on_a_terminal_asks_each_field_again_until_it_is_valid(write_suite: SuiteFactory) -> None:
    path = write_suite(DEPLOY_STDIO, UNANSWERED)
    child = pexpect.spawn(
        sys.executable, ["-m", "elicithub.cli", "test", str(path), "--interactive"], encoding="utf-8", timeout=60
    )
    child.expect("No fixture answers question deploy; asking you.")
    child.expect("How should orders be deployed?")
    child.expect(r"3\. Asia Pacific \(Sydney\) \(ap-southeast-2\)")
    child.expect_exact("Region (number or value): ")
    child.sendline("Mars")
    child.expect_exact("Region has no choice 'Mars'; try again.")
    child.sendline("us east (virginia)")  # a choice's title, in any case
    child.expect_exact("Features (numbers or values, comma-separated, optional): ")
    child.sendline("3, warp")
    child.expect_exact("Features has no choice 'warp'; try again.")
    child.sendline("tracing")
    child.expect_exact("Replicas (whole number 1–10, optional) [default: 2]: ")
    child.sendline("three")
    child.expect_exact("Replicas must be a whole number; try again.")
    child.sendline("0")
    child.expect_exact("Replicas must be at least 1; try again.")
    child.sendline("3")
    child.expect_exact("I understand this deploys to production (y/n): ")
    child.sendline("")
    child.expect_exact("I understand this deploys to production is required; try again.")
    child.sendline("yes")
    child.expect_exact("PASS flow.elicit.yaml::asks the person (1 round)")
    child.expect_exact("1 passed, 0 failed")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_interactive_on_a_terminal_can_decline(write_suite: SuiteFactory) -> None:
    tests = UNANSWERED.replace(
        "text_equals: Deployed orders to us-east-1 with 3 replicas (tracing).", "text_contains: cancelled"
    )
    path = write_suite(DEPLOY_STDIO, tests)
    child = pexpect.spawn(
        sys.executable, ["-m", "elicithub.cli", "test", str(path), "--interactive"], encoding="utf-8", timeout=60
    )
    child.expect_exact("Region (number or value): ")
    child.sendline("/decline")
    child.expect_exact("declined.")
    child.expect_exact("PASS flow.elicit.yaml::asks the person (1 round)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
