"""The downstream MCP bridge: lists and calls tools, and turns both eras of elicitation into broker questions."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as mt
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from elicithub.config import McpServerConfig
from elicithub.core.broker import Broker, Resolution
from elicithub.core.elicitation import Elicitation, new_elicitation
from elicithub.core.runs import Message, Pause
from elicithub.core.schema import SchemaError, validate_requested_schema
from elicithub.runtime.models import Model, ToolSpec
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.triggers.credentials import CredentialGate, CredentialRefused

log = logging.getLogger(__name__)

_TOOLS_TTL_S = 30.0
_STATE_ONLY_BACKOFF_S = (0.05, 0.25)


@dataclass
class _CallAuth:
    """The Authorization header of the call in progress, and whether the server rejected it."""

    header: str | None
    rejected: bool = False


_call_auth: contextvars.ContextVar[_CallAuth | None] = contextvars.ContextVar("elicithub_call_auth", default=None)


class _ContextAuth(httpx2.Auth):
    """Auth for the shared HTTP client: each call's own header, from the context the SDK's tasks inherit."""

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        auth = _call_auth.get()
        if auth is not None and auth.header is not None:
            request.headers["Authorization"] = auth.header
        response = yield request
        if auth is not None and response.status_code == 401:
            auth.rejected = True


class Refused(Exception):
    """A question the hub will not ask; the message is the tool error the model sees."""


class Question:
    """Turns one tool call's MCP elicitation requests into broker elicitations, in either era."""

    def __init__(self, broker: Broker, context: CallContext, server_id: str, tool: str, timeout_s: float) -> None:
        self.broker = broker
        self.context = context
        self.server_id = server_id
        self.tool = tool
        self.timeout_s = timeout_s
        self.failure: str | None = None
        """Set when a question ended the call on our side (unsupported, expired); it becomes the tool error."""

    def build(self, params: mt.ElicitRequestParams) -> Elicitation:
        name = f"{self.server_id}.{self.tool}"
        if not self.context.can_ask:
            raise Refused(
                f"Tool {name} needs input from the user ({params.message!r}), but this chat client cannot show "
                "questions. Ask again from a signed-in client that sends x-supports-elicitation: true."
            )
        common: dict[str, Any] = {
            "conversation_id": self.context.conversation_id,
            "user_id": self.context.user_id,
            "run_id": self.context.run_id,
            "message": params.message,
            "timeout_s": self.timeout_s,
            "context": {"trigger": "mcp_elicitation", "serverId": self.server_id, "toolName": self.tool},
        }
        if isinstance(params, mt.ElicitRequestURLParams):
            parts = urlsplit(params.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise Refused(f"Tool {name} asked the user to open a link that is not http(s); it was not shown.")
            return new_elicitation(mode="url", url=params.url, **common)
        schema: dict[str, Any] = dict(params.requested_schema)
        try:
            validate_requested_schema(schema)
        except SchemaError as exc:
            raise Refused(f"Tool {name} asked an invalid question: {exc}") from None
        return new_elicitation(mode="form", requested_schema=schema, **common)

    def result(self, elicitation: Elicitation, resolution: Resolution) -> mt.ElicitResult:
        if resolution.outcome == "expired":
            self.failure = (
                f"The user did not answer {elicitation.message!r} within {self.timeout_s:g} s; "
                f"the call to {self.server_id}.{self.tool} was not completed."
            )
            return mt.ElicitResult(action="cancel")
        action = {"accepted": "accept", "declined": "decline", "cancelled": "cancel"}[resolution.outcome]
        content = resolution.content if action == "accept" and elicitation.mode == "form" else None
        return mt.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    async def ask(self, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        """A 2025-11-25 question: its open request cannot outlive us, so after a restart the call runs again."""
        elicitation = self.build(params)
        assert self.context.asker is not None  # build() refuses when the call cannot ask
        [resolution] = await self.context.asker.ask([elicitation], trigger="mcp", state={"kind": "rerun"})
        return self.result(elicitation, resolution)

    async def ask_all(
        self, requests: dict[str, mt.ElicitRequest], round_: mt.InputRequiredResult, rounds: int
    ) -> dict[str, mt.ElicitResult]:
        """One MRTR round: every question is shown at once and answered independently."""
        keys = list(requests)
        elicitations = [self.build(requests[k].params) for k in keys]
        assert self.context.asker is not None
        state = {
            "kind": "mrtr",
            "request_state": round_.request_state,
            "input_requests": round_.model_dump(by_alias=True, mode="json", exclude_none=True),
            "rounds": rounds,
        }
        resolutions = await self.context.asker.ask(elicitations, trigger="mcp", keys=keys, state=state)
        return {k: self.result(e, r) for k, e, r in zip(keys, elicitations, resolutions, strict=True)}

    async def answers_to(self, pause: Pause) -> dict[str, mt.ElicitResult]:
        """The answers to a round asked before a restart: waits for any still open."""
        assert self.context.asker is not None
        answers: dict[str, mt.ElicitResult] = {}
        for key, resolution in (await self.context.asker.answers(pause)).items():
            if resolution is None:
                answers[key] = mt.ElicitResult(action="cancel")
                continue
            elicitation = await self.broker.store.get(resolution.elicitation_id)
            assert elicitation is not None
            answers[key] = self.result(elicitation, resolution)
        return answers


class McpBridge:
    """Every configured downstream MCP server, behind the run loop's `Tools` protocol."""

    def __init__(
        self,
        servers: list[McpServerConfig],
        broker: Broker,
        *,
        timeout_s: float,
        max_rounds: int,
        sampler: Model | None,
        gate: CredentialGate | None = None,
    ) -> None:
        self.servers = {s.id: s for s in servers}
        self.gate = gate
        self.broker = broker
        self.timeout_s = timeout_s
        self.max_rounds = max_rounds
        self.sampler = sampler
        self._tools: dict[str, tuple[float, list[ToolSpec]]] = {}
        self._listing: dict[str, asyncio.Lock] = {}
        self._http: httpx2.AsyncClient | None = None

    def _http_client(self) -> httpx2.AsyncClient:
        # One pooled HTTP client for every downstream call: building one per call costs ~20 ms of blocking TLS setup.
        # Its read timeout outlasts a question, because a 2025-11-25 server keeps the response open while it asks.
        if self._http is None:
            self._http = create_mcp_http_client(
                timeout=httpx2.Timeout(30, read=max(300, self.timeout_s + 60)), auth=_ContextAuth()
            )
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    def _client(self, server: McpServerConfig, question: Question | None = None) -> Client:
        if server.url is not None:
            target: Any = streamable_http_client(server.url, http_client=self._http_client())
        else:
            assert server.command is not None
            target = StdioServerParameters(command=server.command[0], args=server.command[1:])

        async def on_elicit(
            context: ClientRequestContext, params: mt.ElicitRequestParams
        ) -> mt.ElicitResult | mt.ErrorData:
            if question is None:
                return mt.ErrorData(code=mt.INVALID_REQUEST, message="No user is waiting for this request.")
            try:
                return await question.ask(params)
            except Refused as exc:
                question.failure = str(exc)
                return mt.ErrorData(code=mt.INVALID_REQUEST, message=str(exc))

        return Client(
            target,
            mode=server.protocol,
            elicitation_callback=on_elicit,
            sampling_callback=self._sample,
            list_roots_callback=_no_roots,
            cache=None,
        )

    async def list_tools(self, context: CallContext | None = None) -> list[ToolSpec]:
        specs: list[ToolSpec] = []
        results = await asyncio.gather(
            *(self._server_tools(s, context) for s in self.servers.values()), return_exceptions=True
        )
        for server, result in zip(self.servers.values(), results, strict=True):
            if isinstance(result, BaseException):
                log.warning("MCP server %s is unavailable: %s", server.id, _reason(result))
            else:
                specs.extend(result)
        return specs

    async def _server_tools(self, server: McpServerConfig, context: CallContext | None) -> list[ToolSpec]:
        cached = self._tools.get(server.id)
        if cached is not None and time.monotonic() - cached[0] < _TOOLS_TTL_S:
            return cached[1]
        # One listing at a time per server: a burst of runs (a restart resuming hundreds) shares one answer.
        async with self._listing.setdefault(server.id, asyncio.Lock()):
            cached = self._tools.get(server.id)
            if cached is not None and time.monotonic() - cached[0] < _TOOLS_TTL_S:
                return cached[1]
            return await self._list_server_tools(server, context, cached)

    async def _list_server_tools(
        self, server: McpServerConfig, context: CallContext | None, cached: tuple[float, list[ToolSpec]] | None
    ) -> list[ToolSpec]:
        header = await self._listing_authorization(server, context)
        if server.credential_scope != "none" and header is None:
            # Never call a protected server without its token: offer what we know of its tools.
            return cached[1] if cached is not None else self._declared(server)
        auth = _CallAuth(header)
        reset = _call_auth.set(auth)
        try:
            async with self._client(server) as client:
                listed = await client.list_tools()
        except Exception:
            if auth.rejected and server.credential_scope == "user":
                return cached[1] if cached is not None else self._declared(server)
            raise
        finally:
            _call_auth.reset(reset)
        specs = [
            ToolSpec(f"{server.id}.{t.name}", t.description or t.title or t.name, dict(t.input_schema))
            for t in listed.tools
        ]
        self._tools[server.id] = (time.monotonic(), specs)
        return specs

    @staticmethod
    def _declared(server: McpServerConfig) -> list[ToolSpec]:
        return [ToolSpec(f"{server.id}.{t.name}", t.description or t.name, dict(t.input_schema)) for t in server.tools]

    async def _listing_authorization(self, server: McpServerConfig, context: CallContext | None) -> str | None:
        if self.gate is None or server.credential_scope == "none":
            return None
        if server.credential_scope == "project":
            try:
                return await self.gate.authorization(server, "tools/list", context or _NOBODY)
            except CredentialRefused:
                return None
        if context is None or context.user_id is None:
            return None
        credential = await self.gate.usable(server, context.user_id)
        return None if credential is None else f"Bearer {credential.access_token}"

    async def call(self, name: str, arguments: dict[str, Any], context: CallContext) -> ToolOutcome:
        server_id, _, tool = name.partition(".")
        server = self.servers.get(server_id)
        if server is None or not tool:
            return ToolOutcome(f"There is no MCP server for tool {name}.", is_error=True)
        if self.gate is None or server.credential_scope == "none":
            return await self._call(server, tool, arguments, context, _CallAuth(None))
        for reconnect in (False, True):
            try:
                header = await self.gate.authorization(server, tool, context, reconnect=reconnect)
            except CredentialRefused as exc:
                return ToolOutcome(str(exc), is_error=True)
            auth = _CallAuth(header)
            outcome = await self._call(server, tool, arguments, context, auth)
            if not auth.rejected:
                return outcome
            log.info("%s rejected the credential for %s", server.id, tool)
            if server.credential_scope != "user":
                break
        return ToolOutcome(f"{server.display_name} rejected the credential for {server.id}.{tool}.", is_error=True)

    async def _call(
        self, server: McpServerConfig, tool: str, arguments: dict[str, Any], context: CallContext, auth: _CallAuth
    ) -> ToolOutcome:
        server_id, name = server.id, f"{server.id}.{tool}"
        question = Question(self.broker, context, server_id, tool, self.timeout_s)
        resume = context.asker.resume_from() if context.asker is not None else None
        reset = _call_auth.set(auth)
        try:
            async with self._client(server, question) as client:
                result = await self._call_rounds(client, tool, arguments, question, resume)
        except Exception as exc:
            refused = _leaf(exc)
            if isinstance(refused, Refused):
                return ToolOutcome(str(refused), is_error=True)
            if question.failure is not None:
                return ToolOutcome(question.failure, is_error=True)
            if auth.rejected:
                return ToolOutcome("unauthorized", is_error=True)
            log.warning("call to %s failed: %s", name, _reason(exc))
            return ToolOutcome(f"The MCP server {server_id} failed during {tool}: {_reason(exc)}", is_error=True)
        finally:
            _call_auth.reset(reset)
        if question.failure is not None:
            return ToolOutcome(question.failure, is_error=True)
        return ToolOutcome(_text(result), is_error=bool(result.is_error))

    async def _call_rounds(
        self, client: Client, tool: str, arguments: dict[str, Any], question: Question, resume: Pause | None = None
    ) -> mt.CallToolResult:
        """Drive the 2026-07-28 loop ourselves: each round's questions go to the person, then retry.

        With an `mrtr` resume point, the call continues from the round it was waiting in (after a restart):
        the retry carries that round's `requestState` and the answers given since.
        """
        rounds, delay = 0, _STATE_ONLY_BACKOFF_S[0]
        if resume is not None and resume.state.get("kind") == "mrtr" and resume.state.get("input_requests"):
            waiting = mt.InputRequiredResult.model_validate(resume.state["input_requests"])
            rounds = int(resume.state.get("rounds", 0))
            answers = await self._fulfil(waiting.input_requests or {}, question, answered=resume)
            if question.failure is not None:
                raise Refused(question.failure)
            result: mt.CallToolResult | mt.InputRequiredResult = await client.session.call_tool(
                tool,
                arguments,
                input_responses=answers,
                request_state=waiting.request_state,
                allow_input_required=True,
            )
        else:
            result = await client.session.call_tool(tool, arguments, allow_input_required=True)
        while isinstance(result, mt.InputRequiredResult):
            rounds += 1
            if rounds > self.max_rounds:
                raise Refused(
                    f"Tool {question.server_id}.{tool} kept asking for input for more than {self.max_rounds} rounds; "
                    "the call was stopped."
                )
            responses: mt.InputResponses | None = None
            if result.input_requests:
                delay = _STATE_ONLY_BACKOFF_S[0]
                responses = await self._fulfil(result.input_requests, question, round_=result, rounds=rounds)
                if question.failure is not None:
                    raise Refused(question.failure)
            else:
                await anyio.sleep(delay)
                delay = min(delay * 2, _STATE_ONLY_BACKOFF_S[1])
            result = await client.session.call_tool(
                tool,
                arguments,
                input_responses=responses,
                request_state=result.request_state,
                allow_input_required=True,
            )
        return result

    async def _fulfil(
        self,
        requests: mt.InputRequests,
        question: Question,
        *,
        round_: mt.InputRequiredResult | None = None,
        rounds: int = 0,
        answered: Pause | None = None,
    ) -> mt.InputResponses:
        elicits = {k: r for k, r in requests.items() if isinstance(r, mt.ElicitRequest)}
        responses: mt.InputResponses = {}
        for key, request in requests.items():
            if isinstance(request, mt.ListRootsRequest):
                responses[key] = mt.ListRootsResult(roots=[])
            elif isinstance(request, mt.CreateMessageRequest):
                sampled = await self._sample(None, request.params)
                if isinstance(sampled, mt.ErrorData):
                    raise Refused(f"Tool {question.server_id}.{question.tool} needs sampling: {sampled.message}")
                responses[key] = sampled
        if answered is not None:
            responses.update(await question.answers_to(answered))
        elif elicits:
            assert round_ is not None
            responses.update(await question.ask_all(elicits, round_, rounds))
        return responses

    async def _sample(
        self, context: ClientRequestContext | None, params: mt.CreateMessageRequestParams
    ) -> mt.CreateMessageResult | mt.ErrorData:
        if self.sampler is None:
            return mt.ErrorData(code=mt.INVALID_REQUEST, message="This hub has no model for sampling.")
        messages: list[Message] = []
        if params.system_prompt:
            messages.append({"role": "system", "content": params.system_prompt})
        for message in params.messages:
            blocks = message.content if isinstance(message.content, list) else [message.content]
            text = "\n".join(b.text for b in blocks if isinstance(b, mt.TextContent))
            messages.append({"role": message.role, "content": text})
        turn = await self.sampler.complete(messages, [])
        return mt.CreateMessageResult(
            role="assistant",
            content=mt.TextContent(type="text", text=turn.text or ""),
            model=self.sampler.name,
            stop_reason="endTurn",
        )


_NOBODY = CallContext("", "", None, False)


async def _no_roots(context: ClientRequestContext) -> mt.ListRootsResult:
    return mt.ListRootsResult(roots=[])


def _text(result: mt.CallToolResult) -> str:
    parts = [b.text for b in result.content if isinstance(b, mt.TextContent)]
    if parts:
        return "\n".join(parts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    return ""


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside the groups task groups wrap it in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    leaf = _leaf(exc)
    return str(leaf) or type(leaf).__name__
