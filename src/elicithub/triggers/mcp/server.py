"""One downstream MCP server as a trigger: lists its tools, calls them, and drives their questions in either era."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

import mcp_types as mt
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from elicithub.config import McpServerConfig
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Message, Pause
from elicithub.errors import QuestionRefused
from elicithub.protocol.mcp_rounds import RoundsExceeded, drive_rounds
from elicithub.protocol.mcp_task_requests import TasksClientExtension
from elicithub.protocol.mcp_tasks import TaskHandle
from elicithub.runtime.models import ToolSpec
from elicithub.runtime.models.seam import ModelRequest, Unseen, unshown
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.triggers.credentials import CredentialRefused
from elicithub.triggers.http import CallAuth, authorized
from elicithub.triggers.mcp import McpShared
from elicithub.triggers.mcp.catalogue import Catalogue
from elicithub.triggers.mcp.pauses import RoundState, TaskState
from elicithub.triggers.mcp.questions import Question
from elicithub.triggers.mcp.sessions import Sessions, standalone_caller
from elicithub.triggers.mcp.tasks import TaskFollower, TaskProgress, is_task_pause, start_core_task

log = logging.getLogger(__name__)

CLIENT_INFO = mt.Implementation(name="elicithub", version=version("elicithub"))
"""How the hub names itself to downstream servers (not the SDK's default `mcp`)."""


class McpServerTrigger:
    """The tools of one configured MCP server, under its id."""

    def __init__(self, server: McpServerConfig, shared: McpShared) -> None:
        self.server = server
        self.broker = shared.broker
        self.http = shared.http
        self.timeout_s = shared.timeout_s
        self.max_rounds = shared.max_rounds
        self.sampler = shared.sampler
        self.gate = shared.gate
        self.task_sleep = shared.task_sleep
        self.catalogue = Catalogue(server, self._fetch_tools, shared.gate, shared.listings)
        self._sessions = Sessions(self._client, server.id) if server.url is not None else None

    @property
    def prefix(self) -> str:
        return self.server.id

    async def close(self) -> None:
        if self._sessions is not None:  # the HTTP client under them is shared; whoever made it closes it
            await self._sessions.close()

    def _client(self) -> Client:
        if self.server.url is not None:
            target: Any = streamable_http_client(self.server.url, http_client=self.http)
        else:
            assert self.server.command is not None
            target = StdioServerParameters(command=self.server.command[0], args=self.server.command[1:])
        return Client(
            target,
            mode=self.server.protocol,
            elicitation_callback=_on_elicit,
            sampling_callback=self._sample,
            list_roots_callback=_no_roots,
            client_info=CLIENT_INFO,
            cache=None,
            extensions=[TasksClientExtension()] if self.server.tasks != "off" else None,
        )

    @contextlib.asynccontextmanager
    async def _session(self, auth: CallAuth) -> AsyncIterator[Client]:
        """A session for one call or listing, its requests carrying `auth`: a kept one over HTTP; over stdio the
        server's process lives for the call (its messages carry no call context to tell callers apart)."""
        with authorized(auth):
            if self._sessions is None:
                async with self._client() as client:
                    yield client
            else:
                async with self._sessions.using(auth, _question.get()) as client:
                    yield client

    # -- listing

    async def list_tools(self, context: CallContext | None) -> list[ToolSpec]:
        return await self.catalogue.list_tools(context)

    async def _fetch_tools(self, header: str | None) -> list[mt.Tool] | None:
        """The server's tools listed with `header`; None when it rejected a user's token (else it raises)."""
        auth = CallAuth(header)
        try:
            async with self._session(auth) as client:
                return (await client.list_tools()).tools
        except Exception as exc:
            self._forget_session(auth, exc)
            if header is not None and auth.rejected and self.server.credential_scope == "user":
                return None
            raise

    # -- calling

    async def call(self, tool: str, arguments: JsonObject, context: CallContext) -> ToolOutcome:
        server = self.server
        if self.gate is None or server.credential_scope == "none":
            return await self._call(tool, arguments, context, CallAuth(None))
        # A rejected token gets one new sign-in; a token short of a scope one step-up (never a loop of either).
        reconnect = stepped = False
        step_up: str | None = None
        while True:
            try:
                header = await self.gate.authorization(server, tool, context, reconnect=reconnect, step_up=step_up)
            except CredentialRefused as exc:
                return ToolOutcome(str(exc), is_error=True)
            if server.credential_scope == "user":
                unlocked = await self.catalogue.unlocked(tool, header)
                if unlocked is not None:
                    return unlocked
            auth = CallAuth(header)
            outcome = await self._call(tool, arguments, context, auth)
            if auth.insufficient_scope is not None:
                wanted = auth.insufficient_scope
                log.info("%s wants the scope %r for %s", server.id, wanted, tool)
                if server.credential_scope == "user" and wanted and not stepped:
                    step_up, stepped = wanted, True
                    continue
                return ToolOutcome(_short_of_scope(server.display_name, f"{server.id}.{tool}", wanted), is_error=True)
            if not auth.rejected:
                return outcome
            log.info("%s rejected the credential for %s", server.id, tool)
            if server.credential_scope != "user" or reconnect:
                break
            reconnect, step_up = True, None
        return ToolOutcome(f"{server.display_name} rejected the credential for {server.id}.{tool}.", is_error=True)

    async def _call(self, tool: str, arguments: JsonObject, context: CallContext, auth: CallAuth) -> ToolOutcome:
        server_id = self.server.id
        question = Question(self.broker, context, server_id, tool, self.timeout_s)
        resume = context.asker.resume_from() if context.asker is not None else None
        asking = _question.set(question)
        try:
            result = await self._attempt(tool, arguments, question, resume, auth)
        except Exception as exc:
            refused = _leaf(exc)
            if isinstance(refused, QuestionRefused):
                return ToolOutcome(str(refused), is_error=True)
            if isinstance(refused, RoundsExceeded):
                return ToolOutcome(
                    f"Tool {server_id}.{tool} kept asking for input for more than {self.max_rounds} rounds; "
                    "the call was stopped.",
                    is_error=True,
                )
            if question.failure is not None:
                return ToolOutcome(question.failure, is_error=True)
            if auth.rejected:
                return ToolOutcome("unauthorized", is_error=True)
            log.warning("call to %s.%s failed: %s", server_id, tool, _reason(exc))
            return ToolOutcome(f"The MCP server {server_id} failed during {tool}: {_reason(exc)}", is_error=True)
        finally:
            _question.reset(asking)
        if question.failure is not None:
            return ToolOutcome(question.failure, is_error=True)
        given = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return ToolOutcome(_text(result), is_error=bool(result.is_error), result=given)

    async def _attempt(
        self, tool: str, arguments: JsonObject, question: Question, resume: Pause | None, auth: CallAuth
    ) -> mt.CallToolResult:
        """The call on a kept session; once more on a new one when the server had forgotten the session (its 404
        means it never saw the call)."""
        try:
            return await self._on_session(tool, arguments, question, resume, auth)
        except Exception:
            if not auth.session_lost or question.asked:
                raise
        auth.session_lost = False
        log.info("%s forgot its session; calling %s on a new one", self.server.id, tool)
        return await self._on_session(tool, arguments, question, resume, auth)

    async def _on_session(
        self, tool: str, arguments: JsonObject, question: Question, resume: Pause | None, auth: CallAuth
    ) -> mt.CallToolResult:
        try:
            async with self._session(auth) as client:
                return await self._rounds(client, tool, arguments, question, resume)
        except Exception as exc:
            self._forget_session(auth, exc)
            raise

    def _forget_session(self, auth: CallAuth, exc: BaseException) -> None:
        """A refused token or a broken connection ends the session for everyone using it; a protocol error
        about one request (a JSON-RPC error) leaves it open."""
        if self._sessions is not None and (auth.rejected or auth.session_lost or not isinstance(_leaf(exc), MCPError)):
            self._sessions.discard(auth)

    async def _rounds(
        self, client: Client, tool: str, arguments: JsonObject, question: Question, resume: Pause | None
    ) -> mt.CallToolResult:
        """The call, its 2026-07-28 rounds asked of the person, and the task it may become followed to its end; with
        an `mrtr` resume point (after a restart) it goes on from the round it waited in, answered with what was given
        since, and with a `task` one it goes on following that task (never calling the tool again)."""
        follower = TaskFollower(
            client.session,
            question,
            lambda round_, state: self._fulfil(round_, question, state, None),
            max_rounds=self.max_rounds,
            sleep=self.task_sleep,
        )
        if resume is not None and is_task_pause(resume):
            return await follower.follow(TaskProgress.from_pause(resume), resume)
        if await self._as_core_task(client, tool):
            handle = await start_core_task(client.session, tool, arguments)
            return await follower.follow(TaskProgress.created(handle, "2025-11-25"))

        async def retry(
            responses: mt.InputResponses | None, request_state: str | None
        ) -> mt.CallToolResult | mt.InputRequiredResult | mt.Result:
            return await client.session.call_tool(
                tool,
                arguments,
                input_responses=responses,
                request_state=request_state,
                allow_input_required=True,
                allow_claimed=True,
            )

        answered = resume if resume is not None and resume.state.get("kind") == "mrtr" else None

        async def fulfil(round_: mt.InputRequiredResult, rounds: int) -> mt.InputResponses:
            nonlocal answered
            state: RoundState = {
                "kind": "mrtr",
                "request_state": round_.request_state,
                "input_requests": round_.model_dump(by_alias=True, mode="json", exclude_none=True),
                "rounds": rounds,
            }
            responses = await self._fulfil(round_, question, state, answered)
            answered = None
            if question.failure is not None:
                raise QuestionRefused(question.failure)
            return responses

        if answered is not None and answered.state.get("input_requests"):
            waiting = mt.InputRequiredResult.model_validate(answered.state["input_requests"])
            rounds = int(answered.state.get("rounds", 1)) - 1
            result = await drive_rounds(waiting, fulfil=fulfil, retry=retry, max_rounds=self.max_rounds, rounds=rounds)
        else:
            result = await drive_rounds(await retry(None, None), fulfil=fulfil, retry=retry, max_rounds=self.max_rounds)
        if isinstance(result, TaskHandle):
            return await follower.follow(TaskProgress.created(result, "2026-07-28"))
        if not isinstance(result, mt.CallToolResult):
            raise TypeError(f"it answered tools/call with a {type(result).__name__}")
        return result

    async def _as_core_task(self, client: Client, tool: str) -> bool:
        """Whether a 2025-11-25 call goes as a task: `tasks: on` always; `auto` when the server can run tool calls
        as tasks and the tool allows it (a tool that requires it fails otherwise)."""
        session = client.session
        if self.server.tasks == "off" or session.protocol_version != "2025-11-25":
            return False
        if self.server.tasks == "on":
            return True
        capabilities = session.server_capabilities
        tasks = capabilities.tasks if capabilities is not None else None
        if tasks is None or tasks.requests is None or tasks.requests.tools is None or tasks.requests.tools.call is None:
            return False
        listed = await client.list_tools()
        execution = next((t.execution for t in listed.tools if t.name == tool), None)
        return execution is not None and execution.task_support in ("optional", "required")

    async def _fulfil(
        self, round_: mt.InputRequiredResult, question: Question, state: RoundState | TaskState, answered: Pause | None
    ) -> mt.InputResponses:
        """One round's requests answered: roots and sampling by the hub, elicitations by the person (`state`
        recorded on the run's pause), or, for a round asked before a restart, with what they answered since."""
        requests = round_.input_requests or {}
        elicits = {k: r for k, r in requests.items() if isinstance(r, mt.ElicitRequest)}
        responses: mt.InputResponses = {}
        for key, request in requests.items():
            if isinstance(request, mt.ListRootsRequest):
                responses[key] = mt.ListRootsResult(roots=[])
            elif isinstance(request, mt.CreateMessageRequest):
                sampled = await self._sample(None, request.params)
                if isinstance(sampled, mt.ErrorData):
                    raise QuestionRefused(
                        f"Tool {question.server_id}.{question.tool} needs sampling: {sampled.message}"
                    )
                responses[key] = sampled
        if answered is not None:
            responses.update(await question.answers_to(answered))
        elif elicits:
            responses.update(await question.ask_round(elicits, state))
        return responses

    async def _sample(
        self, context: ClientRequestContext | None, params: mt.CreateMessageRequestParams
    ) -> mt.CreateMessageResult | mt.ErrorData:
        """A server's sampling request, answered by the hub's own model."""
        if self.sampler is None:
            return mt.ErrorData(code=mt.INVALID_REQUEST, message="This hub has no model for sampling.")
        messages: list[Message] = []
        if params.system_prompt:
            messages.append({"role": "system", "content": params.system_prompt})
        for message in params.messages:
            blocks = message.content if isinstance(message.content, list) else [message.content]
            text = "\n".join(b.text for b in blocks if isinstance(b, mt.TextContent))
            messages.append({"role": message.role, "content": text})
        turn = await self.sampler.turn(ModelRequest(messages, []), Unseen(), unshown)
        return mt.CreateMessageResult(
            role="assistant",
            content=mt.TextContent(type="text", text=turn.text or ""),
            model=self.sampler.name,
            stop_reason="endTurn",
        )


_question: contextvars.ContextVar[Question | None] = contextvars.ContextVar("elicithub_mcp_question", default=None)
"""The questions of the call in progress. A kept session serves many calls; the SDK runs a server's request in
the context of the call whose request it answers, so this finds the call that asks."""


async def _on_elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult | mt.ErrorData:
    question = _question.get()
    if question is None:
        question = standalone_caller()  # sent related to no call: on the session's standalone stream
    if question is None:
        return mt.ErrorData(code=mt.INVALID_REQUEST, message="No user is waiting for this request.")
    try:
        return await question.ask(params)
    except QuestionRefused as exc:
        question.failure = str(exc)
        return mt.ErrorData(code=mt.INVALID_REQUEST, message=str(exc))


async def _no_roots(context: ClientRequestContext) -> mt.ListRootsResult:
    return mt.ListRootsResult(roots=[])


def _text(result: mt.CallToolResult) -> str:
    parts = [b.text for b in result.content if isinstance(b, mt.TextContent)]
    if parts:
        return "\n".join(parts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    return ""


def _short_of_scope(server: str, tool: str, scope: str) -> str:
    wanted = f" ({scope})" if scope else ""
    return f"{server} needs more access{wanted} for {tool} than the connected account allows."


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside the groups task groups wrap it in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    leaf = _leaf(exc)
    return str(leaf) or type(leaf).__name__
