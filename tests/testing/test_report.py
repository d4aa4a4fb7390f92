"""Reports on plain values: progress lines and JUnit XML that parses whatever a server said."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from elicithub.testing.report import junit, progress, summary
from elicithub.testing.runner import Outcome


def test_a_failure_is_indented_under_its_line() -> None:
    failed = Outcome(Path("s.elicit.yaml"), "t", failures=["first\nsecond", "third"])
    assert progress(failed) == "FAIL s.elicit.yaml::t\n  first\n  second\n  third"
    assert progress(Outcome(Path("s.elicit.yaml"), "u", rounds=2)) == "PASS s.elicit.yaml::u (2 rounds)"
    assert summary([failed]) == "0 passed, 1 failed" and summary([]) == "no tests ran"


def test_junit_xml_parses_even_when_a_server_sent_control_characters() -> None:
    outcomes = [
        Outcome(Path("a.elicit.yaml"), "ok"),
        Outcome(Path("a.elicit.yaml"), "bad \x1b", failures=["text is '\x1b[31mred\x00'", "second <reason> & more"]),
        Outcome(Path("b.elicit.yaml"), "other"),
    ]
    root = ET.fromstring(junit(outcomes).encode())
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in root] == [
        ("a.elicit.yaml", "2", "1"),
        ("b.elicit.yaml", "1", "0"),
    ]
    [failure] = root[0][1]
    assert root[0][1].get("name") == "bad \\x1b"
    assert failure.get("message") == "text is '\\x1b[31mred\\x00'"
    assert failure.text == "text is '\\x1b[31mred\\x00'\n\nsecond <reason> & more"
