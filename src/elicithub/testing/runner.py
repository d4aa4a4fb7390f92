"""Running one YAML test: connect (or replay), call the tool, answer its questions in either era through the hub's
own round driver, and check what came back."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
import mcp_types as mt
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.client._transport import Transport
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from elicithub.protocol.mcp_rounds import RoundsExceeded, drive_rounds, is_full_round
from elicithub.testing.answers import Answers, Asked, Person, TestFailure
from elicithub.testing.cassette import CassetteError, cassette_path, read_cassette, write_cassette
from elicithub.testing.expect import check
from elicithub.testing.suite import LoadedSuite, ServerSpec, TestSpec
from elicithub.testing.transport import Recording, Replay

CLIENT_INFO = mt.Implementation(name="elicithub-test", version="1")
"""How the runner names itself to servers: fixed, so cassettes do not change with elicithub's version."""


@dataclass(frozen=True)
class RunOptions:
    record: Path | None = None
    replay: Path | None = None
    person: Person | None = None
    """Who answers a question no fixture answers (the interactive prompt); None fails the test instead."""


@dataclass
class Outcome:
    """One test's verdict: `failures` is empty when it passed."""

    suite: Path
    name: str
    failures: list[str] = field(default_factory=list)
    rounds: int = 0
    asked: list[Asked] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class HttpRefusals:
    """The last HTTP error status of a streamable-HTTP server (the SDK turns it into a generic JSON-RPC error)."""

    status: int | None = None

    async def see(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.status = response.status_code


def server_transport(spec: ServerSpec, folder: Path, stack: AsyncExitStack, refusals: HttpRefusals) -> Transport:
    """The live connection: streamable HTTP, or a stdio command run in the suite's folder (`python` is the
    interpreter running the tests, so a suite works the same inside any virtual environment)."""
    if spec.url is not None:
        http = create_mcp_http_client(headers=spec.headers or None)
        http.event_hooks["response"].append(refusals.see)
        stack.push_async_callback(http.aclose)
        transport: Transport = streamable_http_client(spec.url, http_client=http)
        return transport
    assert spec.command is not None
    command, *args = spec.command
    if command == "python":
        command = sys.executable
    env = {**get_default_environment(), **spec.env} if spec.env else None
    return stdio_client(StdioServerParameters(command=command, args=args, env=env, cwd=folder))


async def run_test(loaded: LoadedSuite, test: TestSpec, options: RunOptions) -> Outcome:
    outcome = Outcome(loaded.path, test.name)
    answers = Answers(test.input_responses, options.person)
    max_rounds = test.max_rounds or loaded.suite.max_rounds
    async with AsyncExitStack() as stack:
        replay: Replay | None = None
        recording: Recording | None = None
        refusals = HttpRefusals()
        if options.replay is not None:
            try:
                replay = Replay(read_cassette(cassette_path(options.replay, loaded.path, test.name)))
            except CassetteError as exc:
                outcome.failures.append(str(exc))
                return outcome
            transport: Transport = replay
        else:
            transport = server_transport(loaded.suite.server, loaded.path.parent, stack, refusals)
            if options.record is not None:
                transport = recording = Recording(transport)
        call = _Call(test, answers, max_rounds)
        # With a person at the terminal the test takes as long as they do; otherwise a hung server fails it.
        timeout = None if options.person is not None else loaded.suite.timeout_s
        try:
            with anyio.fail_after(timeout):
                result = await call.run(transport, loaded.suite.server)
        except TimeoutError:
            outcome.failures.append(f"the test did not finish within {loaded.suite.timeout_s:g} s (timeout_s)")
        except Exception as exc:
            outcome.failures.append(_why(exc, call, replay, refusals))
        else:
            outcome.failures += call.notes
            outcome.failures += check(test.expect, result, call.rounds, answers.asked)
            if replay is not None and replay.leftover():
                outcome.failures.append(
                    f"the recording has {len(replay.leftover())} more request(s) the run never sent"
                )
        outcome.rounds, outcome.asked = call.rounds, answers.asked
    if recording is not None and options.record is not None:
        write_cassette(
            cassette_path(options.record, loaded.path, test.name), loaded.path, test.name, recording.messages
        )
    return outcome


class _Call:
    """One tool call and its questions: 2026-07-28 rounds through `drive_rounds`, 2025-11-25 requests in order."""

    def __init__(self, test: TestSpec, answers: Answers, max_rounds: int) -> None:
        self.test = test
        self.answers = answers
        self.max_rounds = max_rounds
        self.rounds = 0
        self.failure: TestFailure | None = None
        self.notes: list[str] = []

    async def run(self, transport: Transport, spec: ServerSpec) -> mt.CallToolResult:
        async with Client(
            transport,
            mode=spec.protocol,
            elicitation_callback=self._elicited,
            list_roots_callback=_no_roots,
            client_info=CLIENT_INFO,
            cache=None,
        ) as client:
            tool, arguments = self.test.call.tool, self.test.call.arguments

            async def retry(
                responses: mt.InputResponses | None, state: str | None
            ) -> mt.CallToolResult | mt.InputRequiredResult:
                result = await client.session.call_tool(
                    tool, arguments, input_responses=responses, request_state=state, allow_input_required=True
                )
                return self._recognized(result)

            first = await retry(None, None)
            result = await drive_rounds(first, fulfil=self._fulfil, retry=retry, max_rounds=self.max_rounds)
        if self.failure is not None:
            raise self.failure
        return result

    def _recognized(
        self, result: mt.CallToolResult | mt.InputRequiredResult
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        if not isinstance(result, mt.InputRequiredResult):
            return result
        raw = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if is_full_round(raw):
            return result
        self.notes.append(
            "the server returned a half-shaped InputRequiredResult (inputRequests and requestState must both be "
            f"non-empty), taken as an ordinary result: {raw}"
        )
        return mt.CallToolResult(content=[])

    async def _fulfil(self, round_: mt.InputRequiredResult, number: int) -> mt.InputResponses:
        self.rounds = number
        responses: mt.InputResponses = {}
        for key, request in (round_.input_requests or {}).items():
            if isinstance(request, mt.ElicitRequest):
                responses[key] = await self.answers.by_key(key, request.params, number)
            elif isinstance(request, mt.ListRootsRequest):
                responses[key] = mt.ListRootsResult(roots=[])
            else:
                raise TestFailure(f"input request {key!r} is {request.method}, which the test runner cannot answer")
        return responses

    async def _elicited(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult | mt.ErrorData:
        # A 2025-11-25 question: our failure is kept (the server only sees an error) and reported after the call.
        self.rounds += 1
        try:
            if self.rounds > self.max_rounds:
                raise TestFailure(f"the server kept asking for more than {self.max_rounds} rounds")
            return await self.answers.in_order(params)
        except TestFailure as exc:
            self.failure = self.failure or exc
            return mt.ErrorData(code=mt.INVALID_REQUEST, message=str(exc))


async def _no_roots(context: ClientRequestContext) -> mt.ListRootsResult:
    return mt.ListRootsResult(roots=[])


def _why(exc: BaseException, call: _Call, replay: Replay | None, refusals: HttpRefusals) -> str:
    """The failure in the suite's terms: a replay difference first, then our own verdicts, then the error."""
    if replay is not None and replay.mismatch is not None:
        return f"the client sent a request that differs from the recording:\n{replay.mismatch}"
    leaf = _leaf(exc)
    if call.failure is not None:
        return str(call.failure)
    if isinstance(leaf, TestFailure):
        return str(leaf)
    if isinstance(leaf, RoundsExceeded):
        return f"the server kept asking for more than {leaf.max_rounds} rounds"
    if isinstance(leaf, MCPError) and leaf.code == mt.CONNECTION_CLOSED:
        return "the connection to the server closed before the call finished (did the server start?)"
    if isinstance(leaf, MCPError) and refusals.status is not None:
        hint = " (does it need a token in the suite's server headers:?)" if refusals.status in (401, 403) else ""
        return f"the server answered HTTP {refusals.status}{hint}: {leaf}"
    if isinstance(leaf, MCPError):
        return f"the server answered with an error: {leaf}"
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
