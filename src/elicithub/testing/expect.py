"""A test's expectations, checked against the final tool result and what was asked on the way."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as mt

from elicithub.testing.answers import Asked
from elicithub.testing.suite import Expect


def result_text(result: mt.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, mt.TextContent))


def check(expect: Expect, result: mt.CallToolResult, rounds: int, asked: list[Asked]) -> list[str]:
    """Every expectation that does not hold, in words."""
    problems: list[str] = []
    text = result_text(result)
    wanted = [expect.text_contains] if isinstance(expect.text_contains, str) else expect.text_contains or []
    problems += [f"text does not contain {w!r}; it is {text!r}" for w in wanted if w not in text]
    if expect.text_equals is not None and text != expect.text_equals:
        problems.append(f"text is {text!r}, expected {expect.text_equals!r}")
    if expect.is_error is not None and bool(result.is_error) != expect.is_error:
        problems.append(f"is_error is {bool(result.is_error)}, expected {expect.is_error} (text: {text!r})")
    if expect.rounds is not None and rounds != expect.rounds:
        problems.append(f"the server asked in {rounds} round(s), expected {expect.rounds}")
    if expect.structured is not None:
        where = _subset_problem(expect.structured, result.structured_content, "structured")
        if where is not None:
            shown = json.dumps(result.structured_content, sort_keys=True)
            problems.append(f"{where}; structuredContent is {shown}")
    if expect.questions is not None:
        problems += _question_problems(expect, asked)
    return problems


def _subset_problem(expected: Any, actual: Any, path: str) -> str | None:
    """Where `expected` is not a JSON subset of `actual`: objects may have more keys, lists match item by item."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path} is not an object"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}.{key} is missing"
            problem = _subset_problem(value, actual[key], f"{path}.{key}")
            if problem is not None:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{path} is not a list of {len(expected)} items"
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            problem = _subset_problem(want, got, f"{path}[{index}]")
            if problem is not None:
                return problem
        return None
    same = (expected == actual and type(expected) is type(actual)) or _same_number(expected, actual)
    return None if same else f"{path} is {json.dumps(actual)}, expected {json.dumps(expected)}"


def _same_number(a: Any, b: Any) -> bool:
    def number(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    return number(a) and number(b) and a == b


def _question_problems(expect: Expect, asked: list[Asked]) -> list[str]:
    wanted = expect.questions or []
    if len(wanted) != len(asked):
        shown = [q.key or q.message for q in asked]
        return [f"{len(asked)} question(s) were asked ({shown}), expected {len(wanted)}"]
    problems: list[str] = []
    for index, (want, got) in enumerate(zip(wanted, asked, strict=True), start=1):
        if want.key is not None and want.key != got.key:
            problems.append(f"question {index} has key {got.key!r}, expected {want.key!r}")
        if want.mode is not None and want.mode != got.mode:
            problems.append(f"question {index} is a {got.mode} question, expected {want.mode}")
        if want.message is not None and want.message != got.message:
            problems.append(f"question {index} asks {got.message!r}, expected {want.message!r}")
        if want.message_contains is not None and want.message_contains not in got.message:
            problems.append(f"question {index} asks {got.message!r}, which does not contain {want.message_contains!r}")
    return problems
