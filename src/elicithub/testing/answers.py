"""Answering a server's questions in a test: from the suite's fixtures (checked with the hub's own rule, `decide`),
else from a person at the terminal, else the test fails naming the question."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import mcp_types as mt

from elicithub.core.elicitation import Answer, Invalid, Resolve, decide, new_elicitation, utcnow
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.schema import SchemaError, validate_requested_schema
from elicithub.testing.errors import TestRunnerError
from elicithub.testing.suite import Fixture


class TestFailure(TestRunnerError):
    """The test fails; the message says why, in terms of the suite."""


@dataclass(frozen=True)
class Asked:
    """One question the server asked: `key` is its inputRequests key (2026-07-28) or the fixture it took."""

    key: str | None
    mode: str
    message: str
    round: int
    schema: JsonObject | None = None
    url: str | None = None

    def describe(self) -> str:
        shown = json.dumps(self.schema, sort_keys=True) if self.schema is not None else f"url {self.url}"
        name = f"{self.key!r}" if self.key is not None else f"#{self.round}"
        return f"question {name} ({self.message!r}); schema: {shown}"


Person = Callable[[Asked], Awaitable[Answer]]
"""Asks someone at the terminal; returns their answer (already valid for the question)."""


def asked_of(key: str | None, params: mt.ElicitRequestParams, round_: int) -> Asked:
    if isinstance(params, mt.ElicitRequestURLParams):
        return Asked(key, "url", params.message, round_, url=params.url)
    return Asked(key, "form", params.message, round_, schema=dict(params.requested_schema))


class Answers:
    """The fixtures of one test and what was asked of them, in order."""

    def __init__(self, fixtures: dict[str, Fixture], person: Person | None) -> None:
        self.fixtures = fixtures
        self.person = person
        self.asked: list[Asked] = []
        self._used: set[str] = set()

    async def by_key(self, key: str, params: mt.ElicitRequestParams, round_: int) -> mt.ElicitResult:
        """A 2026-07-28 question: the fixture under its inputRequests key."""
        asked = asked_of(key, params, round_)
        self.asked.append(asked)
        return await self._answer(asked, self.fixtures.get(key))

    async def in_order(self, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        """A 2025-11-25 question: the first unused fixture whose `match` fits, else the next unused one without."""
        unused = [k for k in self.fixtures if k not in self._used]
        fits = [k for k in unused if (m := self.fixtures[k].match) is not None and m.message_contains in params.message]
        plain = [k for k in unused if self.fixtures[k].match is None]
        key = next(iter(fits or plain), None)
        if key is not None:
            self._used.add(key)
        asked = asked_of(key, params, len(self.asked) + 1)
        self.asked.append(asked)
        return await self._answer(asked, None if key is None else self.fixtures[key])

    async def _answer(self, asked: Asked, fixture: Fixture | None) -> mt.ElicitResult:
        if asked.schema is not None:
            try:
                validate_requested_schema(asked.schema)
            except SchemaError as exc:
                raise TestFailure(f"the server asked an invalid question {asked.message!r}: {exc}") from None
        if fixture is not None:
            answer = Answer(fixture.action, fixture.content)
        elif self.person is not None:
            answer = await self.person(asked)
        else:
            raise TestFailure(f"no fixture answers {asked.describe()}")
        return _checked(asked, answer)


def _checked(asked: Asked, answer: Answer) -> mt.ElicitResult:
    """The answer as the server gets it: checked against the question's schema with its defaults applied."""
    question = new_elicitation(
        conversation_id="test",
        user_id="test",
        run_id="test",
        mode="url" if asked.mode == "url" else "form",
        message=asked.message,
        timeout_s=60,
        requested_schema=asked.schema,
        url=asked.url,
    )
    decision = decide(question, answer, utcnow())
    if isinstance(decision, Invalid):
        problems = "; ".join(f"{e.field or 'content'}: {e.message}" for e in decision.errors)
        name = asked.key if asked.key is not None else f"#{asked.round}"
        raise TestFailure(f"the answer to {name!r} does not fit its schema: {problems}")
    assert isinstance(decision, Resolve) and decision.answer is not None
    content = decision.answer.content if asked.mode == "form" else None
    return mt.ElicitResult(action=decision.answer.action, content=content)
