"""What a run says: a progress line per test, the failures, a summary line, and JUnit XML for CI."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from elicithub.testing.runner import Outcome

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold at all, escaped or not (a server's text may contain them)."""


def _xml(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def progress(outcome: Outcome) -> str:
    """One line per test, then each failure indented under it."""
    where = f"{outcome.suite.name}::{outcome.name}"
    if outcome.passed:
        rounds = f" ({outcome.rounds} round{'s' if outcome.rounds != 1 else ''})" if outcome.rounds else ""
        return f"PASS {where}{rounds}"
    details = "\n".join("  " + failure.replace("\n", "\n  ") for failure in outcome.failures)
    return f"FAIL {where}\n{details}"


def summary(outcomes: list[Outcome]) -> str:
    failed = sum(not o.passed for o in outcomes)
    if not outcomes:
        return "no tests ran"
    return f"{len(outcomes) - failed} passed, {failed} failed"


def junit(outcomes: list[Outcome]) -> str:
    """JUnit XML: one <testsuite> per suite file, one <testcase> per test, a <failure> holding every reason."""
    root = ET.Element("testsuites", name="elicithub test", tests=str(len(outcomes)))
    root.set("failures", str(sum(not o.passed for o in outcomes)))
    by_suite: dict[Path, list[Outcome]] = {}
    for outcome in outcomes:
        by_suite.setdefault(outcome.suite, []).append(outcome)
    for path, members in by_suite.items():
        element = ET.SubElement(root, "testsuite", name=path.name, file=str(path), tests=str(len(members)))
        element.set("failures", str(sum(not o.passed for o in members)))
        element.set("errors", "0")
        for outcome in members:
            case = ET.SubElement(element, "testcase", classname=path.name.split(".")[0], name=_xml(outcome.name))
            if not outcome.passed:
                failure = ET.SubElement(case, "failure", message=_xml(outcome.failures[0].splitlines()[0]))
                failure.text = _xml("\n\n".join(outcome.failures))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: Path, outcomes: list[Outcome], say: Callable[[str], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit(outcomes), encoding="utf-8")
    say(f"JUnit XML written to {path}")
