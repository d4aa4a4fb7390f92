"""Test suites for MCP servers that ask questions: the YAML schema, and loading that names the key path and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from elicithub.core.jsoncodec import JsonObject
from elicithub.testing.errors import TestRunnerError

DEFAULT_MAX_ROUNDS = 5
DEFAULT_TIMEOUT_S = 60.0


class SuiteError(TestRunnerError):
    """A suite file cannot be used; the message names the file, and each problem's key path and line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSpec(_Strict):
    """Where the server under test is: a streamable-HTTP `url`, or a stdio `command` (run in the suite's folder)."""

    url: str | None = Field(default=None, pattern=r"^https?://")
    command: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] = {}
    protocol: Literal["auto", "legacy", "2026-07-28"] = "auto"
    headers: dict[str, str] = {}

    @model_validator(mode="after")
    def _one_target(self) -> ServerSpec:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of url or command")
        return self


class Match(_Strict):
    message_contains: str = Field(min_length=1)


class Fixture(_Strict):
    """One answer: `action`, and for an accepted form its `content` (checked against the question's schema)."""

    action: Literal["accept", "decline", "cancel"] = "accept"
    content: JsonObject | None = None
    match: Match | None = None


class Call(_Strict):
    tool: str = Field(min_length=1)
    arguments: JsonObject = {}


class AskedQuestion(_Strict):
    """What one asked question must look like; only the keys given are compared."""

    key: str | None = None
    mode: Literal["form", "url"] | None = None
    message: str | None = None
    message_contains: str | None = None


class Expect(_Strict):
    text_contains: str | list[str] | None = None
    text_equals: str | None = None
    is_error: bool | None = None
    rounds: int | None = Field(default=None, ge=0)
    structured: Any = None
    questions: list[AskedQuestion] | None = None


class TestSpec(_Strict):
    __test__ = False  # a test of a suite, not a pytest test class
    name: str = Field(min_length=1)
    call: Call
    input_responses: dict[str, Fixture] = Field(default={}, alias="inputResponses")
    expect: Expect = Expect()
    max_rounds: int | None = Field(default=None, ge=1, le=100)


class Suite(_Strict):
    server: ServerSpec
    max_rounds: int = Field(default=DEFAULT_MAX_ROUNDS, ge=1, le=100)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    """How long one test may take (unless a person is answering at the terminal): a server that hangs fails it."""
    tests: list[TestSpec] = Field(min_length=1)

    @field_validator("tests")
    @classmethod
    def _unique_names(cls, tests: list[TestSpec]) -> list[TestSpec]:
        # Names are what -k selects, what reports show and what cassettes are named after.
        names = [t.name for t in tests]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"test names must be unique; repeated: {', '.join(twice)}")
        return tests


class LoadedSuite(BaseModel):
    """A suite with where it came from: stdio commands run in its folder, cassettes are named after it."""

    model_config = ConfigDict(frozen=True)

    path: Path
    suite: Suite


def load_suite(path: Path) -> LoadedSuite:
    """Read and validate one suite; a SuiteError names every problem with its key path and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: a suite is a mapping with server: and tests:")
    try:
        return LoadedSuite(path=path, suite=Suite.model_validate(data))
    except ValidationError as exc:
        lines = _lines(node)
        problems = [_problem(error, lines) for error in exc.errors()]
        raise SuiteError(f"{path}:\n" + "\n".join(f"  {p}" for p in problems)) from None


def _problem(error: Any, lines: dict[tuple[str, ...], int]) -> str:
    loc = tuple(str(part) for part in error["loc"] if not str(part).startswith("function-after"))
    path = ".".join(loc) or "(top)"
    line = next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), None)
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{path} (line {line}): {message}" if line is not None else f"{path}: {message}"


def _lines(node: yaml.Node | None) -> dict[tuple[str, ...], int]:
    """Each key path of the document and the (1-based) line where its value is written."""
    found: dict[tuple[str, ...], int] = {}

    def walk(current: yaml.Node, path: tuple[str, ...]) -> None:
        found[path] = current.start_mark.line + 1
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                name = str(key.value)
                walk(value, (*path, name))
                found[(*path, name)] = key.start_mark.line + 1
        elif isinstance(current, yaml.SequenceNode):
            for index, item in enumerate(current.value):
                walk(item, (*path, str(index)))

    if node is not None:
        walk(node, ())
    return found
