"""Loading suites: problems name the key path and the line they are on."""

from __future__ import annotations

from pathlib import Path

import pytest

from elicithub.testing.suite import DEFAULT_MAX_ROUNDS, SuiteError, load_suite


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.elicit.yaml"
    path.write_text(text)
    return path


def test_a_valid_suite_loads_with_its_defaults(tmp_path: Path) -> None:
    loaded = load_suite(
        write(
            tmp_path,
            "server: {url: http://127.0.0.1:9/mcp}\n"
            "tests:\n"
            "  - name: t\n"
            "    call: {tool: provision}\n"
            "    inputResponses: {region: {content: {region: eu-west-1}}}\n",
        )
    )
    assert loaded.suite.max_rounds == DEFAULT_MAX_ROUNDS
    [test] = loaded.suite.tests
    assert test.input_responses["region"].action == "accept"
    assert loaded.suite.server.protocol == "auto"


def test_every_problem_is_named_by_key_path_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "server:\n"
        "  url: ftp://example.com\n"
        "max_rounds: 0\n"
        "tests:\n"
        "  - name: first\n"
        "    call: {tool: provision}\n"
        "    inputResponses:\n"
        "      region: {action: maybe}\n"
        "    expect:\n"
        "      txt: 1\n",
    )
    with pytest.raises(SuiteError) as raised:
        load_suite(path)
    assert str(raised.value).splitlines() == [
        f"{path}:",
        "  server.url (line 2): String should match pattern '^https?://'",
        "  max_rounds (line 3): Input should be greater than or equal to 1",
        "  tests.0.inputResponses.region.action (line 8): Input should be 'accept', 'decline' or 'cancel'",
        "  tests.0.expect.txt (line 10): unknown key",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "server: {url: http://x/mcp, command: [a]}\ntests: [{name: a, call: {tool: t}}]\n",
            "server (line 1): give exactly one of url or command",
        ),
        ("server: {url: http://x/mcp}\ntests: []\n", "tests (line 2): List should have at least 1 item"),
        (
            "server: {url: http://x/mcp}\ntests:\n  - {name: a, call: {tool: t}}\n  - {name: a, call: {tool: u}}\n",
            "tests (line 2): test names must be unique; repeated: a",
        ),
        ("server: {url: http://x/mcp}\ntests:\n  - name: a\n", "tests.0.call (line 3): Field required"),
    ],
)
def test_structural_problems_are_named(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(SuiteError) as raised:
        load_suite(write(tmp_path, text))
    assert problem in str(raised.value)


def test_yaml_that_does_not_parse_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"(?s)not valid YAML.*line 2"):
        load_suite(write(tmp_path, "server: {url: http://x/mcp}\ntests: [{name: a\n"))


def test_a_missing_file_is_a_suite_error(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="cannot read it"):
        load_suite(tmp_path / "nope.elicit.yaml")
