"""The hub's agents as an MCP server: one tool per agent, whose questions go back to the MCP client that called.

A 2026-07-28 client gets each pause as an `InputRequiredResult` (the round's questions keyed by elicitation id, and
a sealed, single-use `requestState`); its retry answers them and gets the result or the next round, on any
instance. A 2025-11-25 client gets the questions as `elicitation/create` on its session, and the result on the
same call. A client that cannot show questions gets the tool's error at once, like a chat without
`x-supports-elicitation`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from pydantic import Field
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from elicithub import __version__
from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, Elicitation, Invalid, State, decide, utcnow
from elicithub.core.events import RunFinished, RunPaused, StreamEvent, ToolCallFinished
from elicithub.errors import AlreadyResolved, ElicitationNotFound, Expired, HubError, InvalidContent
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.surfaces import AsgiEndpoint, FiniteNumbers, bearer_token, text_after_tools, unauthorized
from elicithub.surfaces.mcp_state import RoundState, StateRefused, Tickets, digest

MRTR = "2026-07-28"

Message = Annotated[str, Field(description="What to ask the agent.")]
ConversationId = Annotated[
    str | None, Field(description="Continue this conversation (from an earlier result's structuredContent).")
]


class McpSurface:
    def __init__(
        self,
        conversations: Conversations,
        broker: Broker,
        tickets: Tickets,
        user_for: Callable[[str], str | None],
        state_key: bytes,
        timeout_s: float,
        agents: dict[str, str],
        host: str = "127.0.0.1",
    ) -> None:
        """`host`: where clients reach the hub (public_url's); on loopback the SDK's DNS-rebinding check is on."""
        self.conversations = conversations
        self.broker = broker
        self.tickets = tickets
        self.user_for = user_for
        security = RequestStateSecurity(
            keys=[state_key], ttl=timeout_s, bind_principal=self._principal, audience="elicithub"
        )
        self.server = MCPServer("elicithub", version=__version__, request_state_security=security, log_level="WARNING")
        for agent, description in agents.items():
            self.server.add_tool(self._tool(agent), name=agent, description=description, structured_output=False)
        app = self.server.streamable_http_app(streamable_http_path="/mcp", host=host)
        endpoint = next(r for r in app.routes if isinstance(r, Route) and r.path == "/mcp")
        self._endpoint: ASGIApp = FiniteNumbers(endpoint.app, status=400)  # as the SDK answers a parse error
        # An ASGI app, not a function, so Starlette hands it the raw request.
        self.routes: list[BaseRoute] = [
            Route("/mcp", AsgiEndpoint(self._gate), methods=["GET", "POST", "DELETE"], include_in_schema=False)
        ]

    def lifespan(self) -> Any:
        return self.server.session_manager.run()

    # -- identity

    def _user(self, headers: Any) -> str | None:
        token = bearer_token(headers.get("authorization") if headers is not None else None)
        return self.user_for(token) if token else None

    def _principal(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        return self._user(getattr(ctx.request, "headers", None))

    async def _gate(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Only the hub's users reach the MCP server: anyone else gets 401 with a bearer challenge."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self._user(headers) is None:
            await unauthorized(send, invalid_token="authorization" in headers)
            return
        await self._endpoint(scope, receive, send)

    # -- the tool

    def _tool(self, agent: str) -> Callable[..., Any]:
        async def tool(
            message: Message, ctx: Context, conversationId: ConversationId = None
        ) -> mt.CallToolResult | mt.InputRequiredResult:
            return await self._call(agent, {"message": message, "conversationId": conversationId}, ctx)

        return tool

    async def _call(
        self, agent: str, arguments: dict[str, Any], ctx: Context
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        user = self._user(ctx.headers)
        if user is None:
            raise MCPError(mt.INVALID_REQUEST, "No user: send a bearer token of one of the hub's users.")
        modes = _modes(ctx.client_capabilities)
        caller = Caller(user, supports_elicitation=bool(modes), surface="mcp", modes=frozenset(modes))
        try:
            if ctx.request_state is not None:
                return await self._retry(caller, RoundState.load(ctx.request_state), ctx, arguments)
            sent = await self.conversations.send(caller, arguments["conversationId"], arguments["message"], agent=agent)
            followed = self._events(caller, sent.conversation_id, sent.run_id, sent.after)
            if (ctx.protocol_version or "") >= MRTR:
                return await self._until_paused(caller, sent.conversation_id, followed, arguments, 1, modes)
            return await self._asking_back(ctx, caller, sent.conversation_id, followed, modes)
        except InvalidContent as exc:
            fields = [{"field": e.field, "message": e.message} for e in exc.errors]
            problems = "; ".join(f"{e.field}: {e.message}" for e in exc.errors)
            raise MCPError(mt.INVALID_PARAMS, f"{exc} {problems}", {"fields": fields}) from None
        except HubError as exc:
            raise MCPError(mt.INVALID_PARAMS, str(exc)) from None

    async def _events(self, caller: Caller, conversation_id: str, run_id: str, after: int) -> AsyncIterator[Any]:
        followed = await self.conversations.follow(caller, conversation_id, run_id=run_id, after=after)
        assert followed is not None
        async for item in followed[1]:
            yield item

    # -- 2026-07-28: rounds returned, and retried

    async def _until_paused(
        self,
        caller: Caller,
        conversation_id: str,
        events: AsyncIterator[tuple[int, StreamEvent]],
        arguments: dict[str, Any],
        round_: int,
        modes: set[str],
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        final: list[str] = []
        failed = False
        async for seq, event in events:
            if isinstance(event, RunPaused):
                waiting = await self._waiting(caller, list(event.elicitation_ids), modes)
                if waiting:
                    await events.aclose()  # type: ignore[attr-defined]
                    return await self._round(caller, conversation_id, waiting, seq, arguments, round_)
            final = text_after_tools(final, event)
            failed = failed or _unasked(event, modes)
            if isinstance(event, RunFinished):
                return _result(conversation_id, "".join(final), event.reason == "error" or failed)
        raise MCPError(mt.INTERNAL_ERROR, "The run's stream ended before the run did.")

    async def _round(
        self,
        caller: Caller,
        conversation_id: str,
        waiting: list[Elicitation],
        after: int,
        arguments: dict[str, Any],
        round_: int,
    ) -> mt.InputRequiredResult:
        assert caller.user_id is not None
        expires_at = min(e.expires_at.timestamp() for e in waiting)
        state = RoundState(
            user_id=caller.user_id,
            conversation_id=conversation_id,
            run_id=waiting[0].run_id,
            elicitation_ids=[e.id for e in waiting],
            after=after,
            arguments=digest(arguments),
            round=round_,
            ticket=await self.tickets.issue(max(expires_at - time.time(), 1)),
            expires_at=expires_at,
        )
        requests: dict[str, mt.InputRequest] = {e.id: _request(e) for e in waiting}
        return mt.InputRequiredResult(input_requests=requests, request_state=state.dump())

    async def _retry(
        self, caller: Caller, state: RoundState, ctx: Context, arguments: dict[str, Any]
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        assert caller.user_id is not None
        answers = await self._checked_answers(caller.user_id, state, ctx.input_responses or {})
        await self.tickets.take(state, caller.user_id, arguments)  # from here on, this state is used up
        for elicitation, response in answers:
            if elicitation.mode == "url" and response.action == "accept":
                # The person went to the link; the sign-in completes there. Wait for it, as long as it may take.
                await self.broker.wait(elicitation.id)
                continue
            try:
                await self.conversations.answer(caller, elicitation.id, Answer(response.action, response.content))
            except (AlreadyResolved, Expired):
                pass  # it ended otherwise meanwhile; the run goes on with that
        modes = _modes(ctx.client_capabilities)
        waiting = await self._waiting(caller, state.elicitation_ids, modes)
        if waiting:  # some were left unanswered: they stay open, in a new round
            return await self._round(caller, state.conversation_id, waiting, state.after, arguments, state.round + 1)
        events = self._events(caller, state.conversation_id, state.run_id, state.after)
        return await self._until_paused(caller, state.conversation_id, events, arguments, state.round + 1, modes)

    async def _checked_answers(
        self, user_id: str, state: RoundState, responses: mt.InputResponses
    ) -> list[tuple[Elicitation, mt.ElicitResult]]:
        """The retry's answers, each for a question of this round and fitting its form; else nothing is taken."""
        answers: list[tuple[Elicitation, mt.ElicitResult]] = []
        for key, response in responses.items():
            if key not in state.elicitation_ids or not isinstance(response, mt.ElicitResult):
                raise StateRefused(f"inputResponses.{key}: this round asked no such question.")
            elicitation = await self.broker.lookup(key, user_id)
            decision = decide(elicitation, Answer(response.action, response.content), utcnow())
            if isinstance(decision, Invalid):
                raise InvalidContent(key, decision.errors)
            answers.append((elicitation, response))
        return answers

    async def _waiting(self, caller: Caller, ids: list[str], modes: set[str]) -> list[Elicitation]:
        """The questions of `ids` still open; one the client cannot show (its mode) is cancelled, not left open."""
        waiting = []
        for elicitation_id in ids:
            try:
                elicitation = await self.broker.lookup(elicitation_id, caller.user_id)
            except ElicitationNotFound:
                continue
            if elicitation.state is not State.PENDING:
                continue
            if elicitation.mode not in modes:
                await self.broker.end(elicitation_id, State.CANCELLED)
                continue
            waiting.append(elicitation)
        return waiting

    # -- 2025-11-25: questions asked back on the session

    async def _asking_back(
        self,
        ctx: Context,
        caller: Caller,
        conversation_id: str,
        events: AsyncIterator[tuple[int, StreamEvent]],
        modes: set[str],
    ) -> mt.CallToolResult:
        final: list[str] = []
        failed = False
        async for _, event in events:
            if isinstance(event, RunPaused):
                for elicitation in await self._waiting(caller, list(event.elicitation_ids), modes):
                    await self._ask_back(ctx, caller, elicitation)
            final = text_after_tools(final, event)
            failed = failed or _unasked(event, modes)
            if isinstance(event, RunFinished):
                return _result(conversation_id, "".join(final), event.reason == "error" or failed)
        raise MCPError(mt.INTERNAL_ERROR, "The run's stream ended before the run did.")

    async def _ask_back(self, ctx: Context, caller: Caller, elicitation: Elicitation) -> None:
        session, request_id = ctx.session, ctx.request_id
        if elicitation.mode == "url":
            assert elicitation.url is not None
            result = await session.elicit_url(elicitation.message, elicitation.url, elicitation.id, request_id)
            if result.action == "accept":
                resolution = await self.broker.wait(elicitation.id)
                if resolution.outcome == "accepted":
                    await session.send_elicit_complete(elicitation.id, request_id)
                return
        else:
            schema: Any = elicitation.requested_schema or {"type": "object", "properties": {}}
            result = await session.elicit_form(elicitation.message, schema, request_id)
        answer = Answer(result.action, result.content if result.action == "accept" else None)
        try:
            await self.conversations.answer(caller, elicitation.id, answer)
        except InvalidContent:
            # The client's form let through what the question does not take: the question is cancelled.
            await self.conversations.answer(caller, elicitation.id, Answer("cancel"))
        except (AlreadyResolved, Expired):
            pass


def _unasked(event: StreamEvent, modes: set[str]) -> bool:
    """A tool of the run failed while this client could not be asked anything: the agent's result is an error
    (the tool may have needed the questions the client never declared it could show)."""
    return not modes and isinstance(event, ToolCallFinished) and event.is_error


def _modes(capabilities: mt.ClientCapabilities | None) -> set[str]:
    """The elicitation modes a client can show: an empty `elicitation` object means form (MCP 2025-11-25)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return set()
    modes = {m for m, on in (("form", elicitation.form), ("url", elicitation.url)) if on is not None}
    return modes or {"form"}


def _request(elicitation: Elicitation) -> mt.ElicitRequest:
    if elicitation.mode == "url":
        assert elicitation.url is not None
        params: mt.ElicitRequestParams = mt.ElicitRequestURLParams(
            message=elicitation.message, url=elicitation.url, elicitation_id=elicitation.id
        )
    else:
        params = mt.ElicitRequestFormParams(
            message=elicitation.message, requested_schema=elicitation.requested_schema or {"type": "object"}
        )
    return mt.ElicitRequest(params=params)


def _result(conversation_id: str, text: str, is_error: bool) -> mt.CallToolResult:
    return mt.CallToolResult(
        content=[mt.TextContent(type="text", text=text)],
        structured_content={"conversationId": conversation_id},
        is_error=is_error,
    )
