"""The hub's agents as an A2A agent (a2a-sdk 1.3, A2A 1.0 with the 0.3 method names accepted).

`contextId` is the conversation and a task is one message's run. A pause becomes `TASK_STATE_INPUT_REQUIRED`
(a form among the questions) or `TASK_STATE_AUTH_REQUIRED` (only sign-ins); its status message carries each
question as text and as a data part `{"elicitation": <elicitation-request event>}`. The next message on the task
answers (`{"elicitationResponse": {...}}`, or plain text for a one-string-field form); it is checked before the
task moves, so bad content fails that request with the field errors and the task stays input-required. A
sign-in completes out of band: the stream stays open and the task goes on by itself (A2A 1.0 §7.6.1). A request
that reads the task as a stream gets the model's text as it comes (answer.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, TypedDict

from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types import (
    CancelTaskRequest,
    Message,
    Part,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import A2AError, InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict
from starlette.routing import BaseRoute, Route

from elicithub.core.elicitation import Answer, Elicitation
from elicithub.core.events import request_event
from elicithub.core.ids import check_conversation_id
from elicithub.core.jsoncodec import whole_numbers
from elicithub.errors import AlreadyResolved, BadRequest, Expired, HubError, InvalidContent, Limited, Overloaded
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.surfaces import expiry
from elicithub.surfaces.a2a import CARD_PATH, PATH
from elicithub.surfaces.a2a.answer import StreamedAnswer
from elicithub.surfaces.a2a.card import BearerCallContext, a2a_caller, agent_card
from elicithub.surfaces.gates import (
    Bearer,
    BearerGate,
    FiniteNumbers,
    field_errors,
    limited_data,
    refusal,
    sdk_endpoint,
)
from elicithub.surfaces.pauses import Ended, Paused, PauseDriver, Show, Status

INTERRUPTED = (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)
TERMINAL = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
)
REMOTE_POLL_S = 0.25
"""How often a subscription to a task running on another hub reads it from the shared store."""
META = "elicithub"
"""The task metadata key holding where its run is (`TaskRun`)."""
STREAMED = "elicithub.streamed"
"""Set in the call context of a request that reads the task as a stream: its answer streams too."""


class TaskRun(TypedDict):
    """Where a task's run is, in the task's metadata: the run, the event log position just before its first event,
    and the questions of the round it waits on (none while it works). Read back, its numbers are doubles (a
    protobuf `Struct` holds the metadata): `paused_at` gives it as read."""

    runId: str
    after: int
    elicitationIds: list[str]


class A2aSurface:
    def __init__(
        self,
        conversations: Conversations,
        tasks: TaskStore,
        bearer: Bearer,
        public_url: str,
        agents: dict[str, str],
        issuer: str | None = None,
    ) -> None:
        """`issuer`: the OpenID provider whose JWTs the hub takes, declared on the agent card."""
        self.conversations = conversations
        self.tasks = tasks
        self.user_for = bearer.user_for
        self.agents = agents
        self.card = agent_card(public_url, agents, issuer)
        self.handler = _Handler(_Executor(self), tasks, self.card, surface=self)
        rpc = create_jsonrpc_routes(self.handler, PATH, BearerCallContext(bearer.user_for), enable_v0_3_compat=True)
        # a2a-sdk answers parse errors with HTTP 200; a body with a number JSON cannot carry gets the same.
        gate = BearerGate(FiniteNumbers(sdk_endpoint(rpc, PATH), status=200), bearer, "")
        self._routes: list[BaseRoute] = [
            *create_agent_card_routes(self.card, card_url=CARD_PATH),
            Route(PATH, gate, methods=["POST"], include_in_schema=False),
        ]

    @property
    def routes(self) -> list[BaseRoute]:
        return self._routes

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.handler.aclose()

    def agent(self, requested: object) -> str:
        """The agent a message asks for (its metadata's `agent`), else the first (the default)."""
        return requested if isinstance(requested, str) and requested in self.agents else next(iter(self.agents))

    # -- answers, taken before the task moves

    async def take_answer(self, message: Message, context: ServerCallContext) -> None:
        """A message on an interrupted task answers its questions. All are checked before any is taken: a bad
        answer (content that does not fit, a question past its deadline) fails the request and none is taken."""
        caller = a2a_caller(context)
        if message.context_id:
            try:
                check_conversation_id(message.context_id)
            except BadRequest as exc:
                raise InvalidParamsError(message=f"contextId: {exc}") from None
        if not message.task_id:
            return
        task = await self.tasks.get(message.task_id, context)
        if task is None or task.status.state not in INTERRUPTED:
            return
        answers = await self._answers(caller, message, _asked_by(task))
        try:
            for elicitation_id, answer in answers:
                await self.conversations.check(caller, elicitation_id, answer)
            for elicitation_id, answer in answers:
                # Answered already (here or elsewhere), or ended since it was checked: the run goes on with that.
                with contextlib.suppress(AlreadyResolved, Expired):
                    await self.conversations.answer(caller, elicitation_id, answer)
        except InvalidContent as exc:
            raise InvalidParamsError(message=refusal(exc), data={"fields": field_errors(exc)}) from None
        except Expired as exc:
            raise InvalidParamsError(message=str(exc), data=expiry(exc)) from None
        except HubError as exc:
            raise InvalidParamsError(message=str(exc)) from None

    async def _answers(self, caller: Caller, message: Message, asked: list[str]) -> list[tuple[str, Answer]]:
        responses: list[Any] = []
        for data in get_data_parts(list(message.parts)):
            if isinstance(data, dict) and "elicitationResponse" in data:
                given = data["elicitationResponse"]
                responses.extend(given if isinstance(given, list) else [given])
        if responses:
            answers = []
            for response in responses:
                if not isinstance(response, dict) or not isinstance(response.get("elicitationId"), str):
                    raise InvalidParamsError(message="elicitationResponse needs an elicitationId.")
                if response["elicitationId"] not in asked:
                    raise InvalidParamsError(message=f"This task asked no question {response['elicitationId']}.")
                action = response.get("action", "accept")
                if action not in ("accept", "decline", "cancel"):
                    raise InvalidParamsError(message="elicitationResponse.action: accept, decline or cancel.")
                content = response.get("content") if action == "accept" else None
                answers.append((response["elicitationId"], Answer(action, whole_numbers(content))))
            return answers
        text = get_message_text(message)
        forms = [e for e in await self.conversations.open_questions(caller, asked) if e.mode == "form"]
        field = _only_string_field(forms[0]) if len(forms) == 1 else None
        if field is None or not text:
            raise InvalidParamsError(
                message='Answer with a data part {"elicitationResponse": {"elicitationId", "action", "content"}} '
                "(plain text answers only a question with one text field)."
            )
        return [(forms[0].id, Answer("accept", {field: text}))]

    async def stop(self, task_id: str, context: ServerCallContext) -> None:
        """CancelTask: the run the task paused in stops, as an MCP task's does: its questions are cancelled and it
        makes no more calls (answered `cancel` instead, they went on downstream as the person's answer). A task names
        its run from its first status on; one cancelled before that has no run yet to stop."""
        task = await self.tasks.get(task_id, context)
        if task is None:
            return
        run_id = paused_at(task).get("runId")
        if isinstance(run_id, str):
            await self.conversations.stop(a2a_caller(context), task.context_id, run_id)


class HubOverloaded(A2AError):
    """The hub holds as many runs as it may: a message that would start a task is refused before the task exists
    (JSON-RPC -32603, the SDK's code for what it does not map, with `data` as `/mcp` gives it)."""


class _Handler(DefaultRequestHandler):
    """The SDK's handler, with answers checked and taken before a message moves an interrupted task."""

    def __init__(self, *args: Any, surface: A2aSurface, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.surface = surface

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        self._shed(params.message)
        await self.surface.take_answer(params.message, context)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        self._shed(params.message)
        await self.surface.take_answer(params.message, context)
        context.state[STREAMED] = True
        async for event in super().on_message_send_stream(params, context):
            yield event

    def _shed(self, message: Message) -> None:
        """A message on no task would start one: an overloaded hub refuses it at once, before the SDK stores a task
        (a message on a task answers it, or goes on with it, and is never refused)."""
        if not message.task_id:
            try:
                self.surface.conversations.shed()
            except Overloaded as exc:
                raise HubOverloaded(message=str(exc), data=limited_data(exc)) from None

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        """Here when the task runs here; else (it runs on another hub sharing the store) its stored snapshot, then
        each change of it as the other hub saves it, up to its end or its next pause."""
        if await self._active_task_registry.get(params.id) is not None:
            async for event in super().on_subscribe_to_task(params, context):
                yield event
            return
        task = await self.surface.tasks.get(params.id, context)
        if task is None:
            raise TaskNotFoundError
        if task.status.state in TERMINAL:
            raise UnsupportedOperationError(message=f"Task {params.id} is in terminal state.")
        yield task
        shown = task
        while True:
            await asyncio.sleep(REMOTE_POLL_S)
            current = await self.surface.tasks.get(params.id, context)
            if current is None:
                return
            before = {a.artifact_id: a for a in shown.artifacts}
            for artifact in current.artifacts:
                # New, or grown by chunks streamed since: sent whole (`append: false` replaces what was sent).
                if before.get(artifact.artifact_id) != artifact:
                    yield TaskArtifactUpdateEvent(task_id=current.id, context_id=current.context_id, artifact=artifact)
            if current.status != shown.status:
                yield TaskStatusUpdateEvent(task_id=current.id, context_id=current.context_id, status=current.status)
                if current.status.state in TERMINAL or current.status.state in INTERRUPTED:
                    return
            shown = current

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        await self.surface.stop(params.id, context)
        task: Task | None = await super().on_cancel_task(params, context)
        return task


class _Executor(AgentExecutor):
    """Runs the hub's agent for a task, over `Conversations`: any instance can continue it from the store."""

    def __init__(self, surface: A2aSurface) -> None:
        self.surface = surface

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        surface = self.surface
        driver = PauseDriver(surface.conversations, a2a_caller(context.call_context))
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        show = _interrupting(updater)
        answer = StreamedAnswer(updater)
        # Streamed only to a request that reads a stream: a blocking one gets the task once it stops.
        seen = answer.seen if context.call_context.state.get(STREAMED) else None
        task = context.current_task
        try:
            if task is None:
                assert context.message is not None
                await event_queue.enqueue_event(
                    new_task(
                        context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message]
                    )
                )
                agent = context.metadata.get("agent") if context.metadata else None
                try:
                    sent = await surface.conversations.send(
                        driver.caller, context.context_id, context.get_user_input(), agent=surface.agent(agent)
                    )
                except Limited as exc:
                    # A2A's own word for work an agent will not take: the task is rejected, saying why and when to
                    # try again.
                    error = {"error": {"message": str(exc), **limited_data(exc)}}
                    await updater.reject(updater.new_agent_message([new_text_part(str(exc)), new_data_part(error)]))
                    return
                # The run is named at once, so a CancelTask before its first pause stops it too.
                run: TaskRun = {"runId": sent.run_id, "after": sent.after, "elicitationIds": []}
                running = {META: run}
                await updater.update_status(TaskState.TASK_STATE_WORKING, metadata=running)
                stopped = await driver.follow(
                    context.context_id, sent.run_id, sent.after, show, updater.start_work, _working(updater), seen
                )
            else:
                # The task's answers were taken before it moved; part of the round may still be unanswered.
                paused = paused_at(task)
                run_id, after = str(paused["runId"]), int(paused["after"])
                stopped = await driver.resume(
                    context.context_id,
                    run_id,
                    _asked_by(task),
                    after,
                    show,
                    updater.start_work,
                    _working(updater),
                    seen,
                )
            if isinstance(stopped, Ended):
                await _end(updater, stopped, answer)
        finally:
            answer.cancel()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.call_context is not None and context.task_id is not None:
            await self.surface.stop(context.task_id, context.call_context)
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def _end(updater: TaskUpdater, ended: Ended, answer: StreamedAnswer) -> None:
    """The task's end: its answer (whole, closing what streamed of it), or its failure."""
    if ended.error:
        if answer.started:
            await answer.finish(ended.text)  # the error streamed as text: its artifact is closed, then failed
        await updater.failed(updater.new_agent_message([new_text_part(ended.text)]))
    else:
        await answer.finish(ended.text)
        await updater.complete()


def _interrupting(updater: TaskUpdater) -> Show:
    """A pause becomes the task's input-required (a form among its questions: the next message answers) or
    auth-required state (only sign-ins: they complete out of band, and the stream stays open until they do)."""

    async def interrupt(paused: Paused) -> bool:
        parts: list[Part] = []
        for elicitation in paused.questions:
            parts.append(new_text_part(_question_text(elicitation)))
            parts.append(new_data_part({"elicitation": request_event(elicitation)}))
        forms = any(e.mode == "form" for e in paused.questions)
        state = TaskState.TASK_STATE_INPUT_REQUIRED if forms else TaskState.TASK_STATE_AUTH_REQUIRED
        ids = [e.id for e in paused.questions]
        run: TaskRun = {"runId": paused.run_id, "after": paused.after, "elicitationIds": ids}
        metadata = {META: run}
        await updater.update_status(state, updater.new_agent_message(parts), metadata=metadata)
        return not forms

    return interrupt


def _working(updater: TaskUpdater) -> Status:
    """What a call says it does (waiting for others' approval) becomes the working task's status message."""

    async def working(text: str) -> None:
        await updater.update_status(TaskState.TASK_STATE_WORKING, updater.new_agent_message([new_text_part(text)]))

    return working


def _question_text(elicitation: Elicitation) -> str:
    if elicitation.mode == "url" and elicitation.url:
        return f"{elicitation.message} {elicitation.url}"
    return elicitation.message


def paused_at(task: Task) -> dict[str, Any]:
    paused = MessageToDict(task.metadata).get(META) if task.HasField("metadata") else None
    return paused if isinstance(paused, dict) else {}


def _asked_by(task: Task) -> list[str]:
    """The questions of the round an interrupted task waits on."""
    return [str(i) for i in paused_at(task).get("elicitationIds", [])]


def _only_string_field(elicitation: Elicitation) -> str | None:
    properties = (elicitation.requested_schema or {}).get("properties") or {}
    if len(properties) != 1:
        return None
    [(name, schema)] = properties.items()
    return name if isinstance(schema, dict) and schema.get("type") == "string" else None
