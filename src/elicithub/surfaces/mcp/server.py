"""The hub's agents as an MCP server: one tool per agent, whose questions go back to the MCP client that called
(beside the downstream tools, surfaces/mcp/gateway.py).

A 2026-07-28 client gets each pause as an `InputRequiredResult` (the round's questions keyed by elicitation id, and
a sealed, single-use `requestState`); its retry answers them and gets the result or the next round, on any
instance. A 2025-11-25 client gets the questions as `elicitation/create` on its session, and the result on the
same call. A client that speaks MCP tasks (either shape) may get the call as a task instead (surfaces/mcp/tasks.py).
A client that cannot show questions gets the tool's error at once, like a chat without `x-supports-elicitation`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import Annotated, Any

import anyio
import mcp_types as mt
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from pydantic import Field
from starlette.routing import BaseRoute, Route

from elicithub import __version__
from elicithub.core.elicitation import Answer, Elicitation
from elicithub.errors import AlreadyResolved, Expired, HubError, InvalidContent, Limited
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.runtime.taken import Sent
from elicithub.runtime.tools import Tools
from elicithub.surfaces import expiry
from elicithub.surfaces.gates import (
    LIMITED,
    Bearer,
    BearerGate,
    FiniteNumbers,
    field_errors,
    limited_data,
    refusal,
    sdk_endpoint,
    user_of,
)
from elicithub.surfaces.mcp import PATH
from elicithub.surfaces.mcp.asking import (
    Finish,
    Start,
    ask_back,
    call_result,
    direct_result,
    elicit_request,
    modes_of,
)
from elicithub.surfaces.mcp.gateway import Gateway
from elicithub.surfaces.mcp.list_changed import ToolListChanges
from elicithub.surfaces.mcp.session_end import SessionEnd
from elicithub.surfaces.mcp.state import RoundState, StateRefused, Tickets, digest
from elicithub.surfaces.mcp.task_calls import CoreTasks, TasksServerExtension, may_be_task
from elicithub.surfaces.mcp.task_records import TaskRecords
from elicithub.surfaces.mcp.tasks import McpTasks
from elicithub.surfaces.pauses import Ended, Paused, PauseDriver, Show, ends_with_sign_in

MRTR = "2026-07-28"

Message = Annotated[str, Field(description="What to ask the agent.")]
ConversationId = Annotated[
    str | None, Field(description="Continue this conversation (from an earlier result's structuredContent).")
]


class McpSurface:
    def __init__(
        self,
        conversations: Conversations,
        tickets: Tickets,
        task_records: TaskRecords,
        bearer: Bearer,
        state_key: bytes,
        timeout_s: float,
        agents: dict[str, str],
        changes: ToolListChanges,
        tools: Tools | None = None,
        connectable: Collection[str] = (),
        host: str = "127.0.0.1",
    ) -> None:
        """`changes`: who hears that a person's tools changed; `tools`: the downstream tools `/mcp` offers too (None:
        the agents only); `connectable`: the user-scoped servers, whose `SERVER.connect` signs a person in. `host`:
        where clients reach the hub (public_url's); on loopback the SDK's DNS-rebinding check is on."""
        self.conversations = conversations
        self.tickets = tickets
        self.user_for = bearer.user_for
        security = RequestStateSecurity(
            keys=[state_key], ttl=timeout_s, bind_principal=self._principal, audience="elicithub"
        )
        self.tasks = McpTasks(conversations, task_records, bearer.user_for, set(agents))
        gateway = Gateway(set(agents), tools, bearer.user_for, self._direct, changes, frozenset(connectable))
        self.server = MCPServer(
            "elicithub",
            version=__version__,
            request_state_security=security,
            log_level="WARNING",
            extensions=[TasksServerExtension(self.tasks)],
            # The gateway's listing is outside the tasks' marks: only the agents' tools may be 2025-11-25 tasks.
            middleware=[gateway.middleware, CoreTasks(self.tasks).middleware],
        )
        for agent, description in agents.items():
            self.server.add_tool(self._tool(agent), name=agent, description=description, structured_output=False)
        app = self.server.streamable_http_app(streamable_http_path=PATH, host=host)
        # Bodies with numbers JSON cannot carry get the parse error the SDK gives any unparsable body (HTTP 400).
        endpoint = SessionEnd(sdk_endpoint(app.routes, PATH))
        gate = BearerGate(FiniteNumbers(endpoint, status=400), bearer, PATH)
        self.routes: list[BaseRoute] = [Route(PATH, gate, methods=["GET", "POST", "DELETE"], include_in_schema=False)]
        self.stopping = False

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            try:
                yield
            finally:
                self.stopping = True  # the calls still open are ended next, by the hub stopping

    def _principal(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        return user_of(getattr(ctx.request, "headers", None), self.user_for)

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
        async def start(caller: Caller) -> Sent:
            return await self.conversations.send(caller, arguments["conversationId"], arguments["message"], agent=agent)

        return await self._follow(start, call_result, arguments, ctx)

    async def _direct(
        self, request: ServerRequestContext[Any, Any], name: str, arguments: dict[str, Any]
    ) -> HandlerResult:
        """A tools/call of a downstream tool: one call, made as an agent's is, and its server's result as given (or,
        for a client that speaks the 2026-07-28 tasks, a task of it as an agent's call would be)."""
        params = mt.CallToolRequestParams.model_validate(request.params)

        async def start(caller: Caller) -> Sent:
            return await self.conversations.call(caller, name, arguments)

        if may_be_task(request, params):
            return await self.tasks.start(request, start, "2026-07-28", params.task is not None, direct=True)
        ctx: Context = Context(request_context=request, mcp_server=self.server, input_params=params)
        result = await self._follow(start, direct_result, arguments, ctx)
        if (ctx.protocol_version or "") >= MRTR:
            # The gateway answers ahead of the SDK's pipeline, which stamps every 2026-07-28 result with the server's
            # own serverInfo: the hub stamps its own here.
            stamp = mt.Implementation(name=self.server.name, version=__version__)
            result.meta = {**(result.meta or {}), mt.SERVER_INFO_META_KEY: stamp.model_dump(exclude_none=True)}
        return result

    async def _follow(
        self, start: Start, finish: Finish, arguments: dict[str, Any], ctx: Context
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        """Start the call's run (or, on a 2026-07-28 retry, go on with it) and follow it to its result or a round."""
        user = user_of(ctx.headers, self.user_for)
        if user is None:
            raise MCPError(mt.INVALID_REQUEST, "No user: send a bearer token of one of the hub's users.")
        modes = modes_of(ctx.client_capabilities)
        caller = Caller(user, supports_elicitation=bool(modes), surface="mcp", modes=frozenset(modes))
        driver = PauseDriver(self.conversations, caller, lambda e: e.mode in modes)
        try:
            if ctx.request_state is not None:
                state = RoundState.load(ctx.request_state)
                return await self._retry(driver, state, ctx, arguments, modes, finish)
            sent = await start(caller)
            show = _answered_in_retry if (ctx.protocol_version or "") >= MRTR else self._asking_back(ctx, caller)
            stopped = await driver.follow(sent.conversation_id, sent.run_id, sent.after, show)
            return await self._result(caller, sent.conversation_id, stopped, arguments, 1, modes, finish)
        except InvalidContent as exc:
            raise MCPError(mt.INVALID_PARAMS, refusal(exc), {"fields": field_errors(exc)}) from None
        except Expired as exc:
            raise MCPError(mt.INVALID_PARAMS, str(exc), expiry(exc)) from None
        except Limited as exc:
            raise MCPError(LIMITED, str(exc), limited_data(exc)) from None
        except HubError as exc:
            raise MCPError(mt.INVALID_PARAMS, str(exc)) from None

    async def _result(
        self,
        caller: Caller,
        conversation_id: str,
        stopped: Paused | Ended | None,
        arguments: dict[str, Any],
        round_: int,
        modes: set[str],
        finish: Finish,
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        """The call's result where the run stopped (`finish` makes it of the run's end), or (2026-07-28) the round it
        waits on."""
        if stopped is None:
            raise MCPError(mt.INTERNAL_ERROR, "The run's stream ended before the run did.")
        if isinstance(stopped, Paused):
            return await self._round(caller, conversation_id, stopped, arguments, round_)
        return finish(conversation_id, stopped, modes)

    # -- 2026-07-28: rounds returned, and retried

    async def _round(
        self, caller: Caller, conversation_id: str, paused: Paused, arguments: dict[str, Any], round_: int
    ) -> mt.InputRequiredResult:
        assert caller.user_id is not None
        expires_at = min(e.expires_at.timestamp() for e in paused.questions)
        state = RoundState(
            user_id=caller.user_id,
            conversation_id=conversation_id,
            run_id=paused.run_id,
            elicitation_ids=[e.id for e in paused.questions],
            after=paused.after,
            arguments=digest(arguments),
            round=round_,
            ticket=await self.tickets.issue(max(expires_at - time.time(), 1)),
            expires_at=expires_at,
        )
        requests: dict[str, mt.InputRequest] = {e.id: elicit_request(e) for e in paused.questions}
        return mt.InputRequiredResult(input_requests=requests, request_state=state.dump())

    async def _retry(
        self,
        driver: PauseDriver,
        state: RoundState,
        ctx: Context,
        arguments: dict[str, Any],
        modes: set[str],
        finish: Finish,
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        caller = driver.caller
        assert caller.user_id is not None
        answers = await self._checked_answers(caller, state, ctx.input_responses or {})
        await self.tickets.take(state, caller.user_id, arguments)  # from here on, this state is used up
        for elicitation, answer in answers:
            if ends_with_sign_in(elicitation, answer):
                await self.conversations.wait(caller, elicitation.id)  # as long as it may take
                continue
            with contextlib.suppress(AlreadyResolved, Expired):
                await self.conversations.answer(caller, elicitation.id, answer)  # else it ended otherwise meanwhile
        # Questions left unanswered stay open, in a new round.
        stopped = await driver.resume(
            state.conversation_id, state.run_id, state.elicitation_ids, state.after, _answered_in_retry
        )
        return await self._result(caller, state.conversation_id, stopped, arguments, state.round + 1, modes, finish)

    async def _checked_answers(
        self, caller: Caller, state: RoundState, responses: mt.InputResponses
    ) -> list[tuple[Elicitation, Answer]]:
        """The retry's answers, each for a question of this round, open and fitting its form; else nothing is taken
        (and the state is not used up)."""
        answers: list[tuple[Elicitation, Answer]] = []
        for key, response in responses.items():
            if key not in state.elicitation_ids or not isinstance(response, mt.ElicitResult):
                raise StateRefused(f"inputResponses.{key}: this round asked no such question.")
            answer = Answer(response.action, response.content)
            answers.append((await self.conversations.check(caller, key, answer), answer))
        return answers

    # -- 2025-11-25: questions asked back on the session

    def _asking_back(self, ctx: Context, caller: Caller) -> Show:
        async def ask_back_here(paused: Paused) -> bool:
            for elicitation in paused.questions:
                try:
                    await ask_back(self.conversations, ctx.session, ctx.request_id, caller, elicitation)
                except BaseException:
                    await self._cancel_abandoned(caller, elicitation)
                    raise
            return True  # answered (or cancelled) here: the run goes on in this call

        return ask_back_here

    async def _cancel_abandoned(self, caller: Caller, elicitation: Elicitation) -> None:
        """The call ended before its question did: its client gave up on it or closed its session (or failed the
        request), so nobody can answer it there, and it is cancelled. Not when the hub stops: the run resumes, and
        its question may still be answered elsewhere."""
        if self.stopping:
            return
        with anyio.CancelScope(shield=True), contextlib.suppress(HubError):
            await self.conversations.cancel(caller, elicitation.id)


async def _answered_in_retry(_: Paused) -> bool:
    """A 2026-07-28 client gets a round as the call's result, and answers it in its retry."""
    return False
