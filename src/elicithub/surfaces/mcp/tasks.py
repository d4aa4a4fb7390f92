"""The hub's agents' calls as MCP tasks, in both shapes, answered by any instance sharing the store (and, for
2026-07-28, the gateway's direct calls of downstream tools, whose result is their server's).

2026-07-28 (the extension `io.modelcontextprotocol/tasks`, declared per request): a call whose run pauses, or waits
for other people's approval, becomes a task (at once, when the client sends `task`); `tasks/get` shows the run's open
questions keyed by elicitation id, `tasks/update` answers them, `tasks/cancel` ends them. 2025-11-25 (core tasks):
`tools/call` with `task` answers `CreateTaskResult`; `tasks/result` waits for the run, asking its questions as
related-task `elicitation/create` on its own stream; `tasks/get`, `tasks/cancel` and `tasks/list` as there. A task's
status is read from the run and its questions each time (surfaces/mcp/task_records.py keeps only whose run it is,
and its end once seen). Where a call becomes a task: surfaces/mcp/task_calls.py.
"""

from __future__ import annotations

import base64
import contextlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
import mcp_types as mt
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from elicithub.core.elicitation import Answer, Elicitation, State
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import Entry
from elicithub.errors import AlreadyResolved, Expired, HubError, InvalidContent, Limited, NotFound
from elicithub.protocol.mcp_tasks import (
    RELATED_TASK,
    TASKS_EXTENSION,
    TERMINAL,
    UNKNOWN_TASK,
    DetailedTask,
    Status,
    TaskError,
    TaskHandle,
    TaskParams,
    UpdateParams,
)
from elicithub.runtime.approvers import awaited as approvals_awaited
from elicithub.runtime.approvers import waiting_for
from elicithub.runtime.conversations import Caller, Conversations, is_open
from elicithub.runtime.taken import Sent
from elicithub.surfaces import expiry
from elicithub.surfaces.gates import LIMITED, field_errors, limited_data, refusal, user_of
from elicithub.surfaces.mcp.asking import (
    Finish,
    Start,
    ask_back,
    call_result,
    direct_result,
    elicit_request,
    modes_of,
)
from elicithub.surfaces.mcp.task_records import TaskRecord, TaskRecords
from elicithub.surfaces.pauses import Ended, Paused, PauseDriver, ends_with_sign_in

CORE_TASKS: Literal["2025-11-25"] = "2025-11-25"
"""The one handshake-era version with tasks in the core."""
POLL_MS = 1000
PAGE = 50
"""Tasks per `tasks/list` page (a module constant, so tests may lower it)."""
ENDED_S = 5.0
"""How long a read waits for the end of a run that is no longer active to reach the log."""

Shape = Literal["2026-07-28", "2025-11-25"]


@dataclass(frozen=True)
class Seen:
    """A task's status as read now, and what it carries."""

    status: Status
    questions: list[Elicitation] = field(default_factory=list)
    result: JsonObject | None = None
    """A completed task's `CallToolResult`, as JSON."""
    error: TaskError | None = None
    message: str | None = None
    """What a working task waits for (an approval others give)."""


class McpTasks:
    def __init__(self, conversations: Conversations, records: TaskRecords, user_for: Any, agents: set[str]) -> None:
        self.conversations = conversations
        self.records = records
        self.user_for = user_for
        self.agents = agents

    # -- a call that becomes a task

    def agent_call(self, agent: str, arguments: dict[str, Any]) -> Start:
        """How a call of `agent`'s tool starts its run (the arguments checked first)."""
        message, conversation_id = arguments.get("message"), arguments.get("conversationId")
        if not isinstance(message, str) or not isinstance(conversation_id, str | None):
            raise MCPError(mt.INVALID_PARAMS, f"{agent} takes {{message: string, conversationId?: string}}.")

        async def start(caller: Caller) -> Sent:
            return await self.conversations.send(caller, conversation_id, message, agent=agent)

        return start

    async def start(
        self, ctx: ServerRequestContext[Any, Any], start: Start, shape: Shape, at_once: bool, direct: bool = False
    ) -> HandlerResult:
        """The call's task handle, or its result when the run ended first. At once when `at_once`; else (2026)
        once the run pauses with questions for the client, or waits for other people's approval (`working`, its
        status message naming them). `direct`: a direct call, whose result is its server's."""
        caller = self._caller(ctx, modes_of(ctx.session.client_capabilities))
        try:
            sent = await start(caller)
            status: Status = "working"
            if not at_once:
                stopped = await self._first_stop(caller, sent)
                if isinstance(stopped, Ended):
                    return _finish(direct)(sent.conversation_id, stopped, set(caller.modes))
                if isinstance(stopped, Paused):
                    status = "input_required"
        except Limited as exc:
            raise MCPError(LIMITED, str(exc), limited_data(exc)) from None
        except HubError as exc:
            raise MCPError(mt.INVALID_PARAMS, str(exc)) from None
        assert caller.user_id is not None
        record = await self.records.create(
            caller.user_id, sent.conversation_id, sent.run_id, sent.after, set(caller.modes), direct
        )
        if shape == CORE_TASKS:
            return mt.CreateTaskResult(task=_core_task(record, status))
        awaited = await approvals_awaited(self.conversations.backend, record.run_id, caller.user_id)
        return TaskHandle(**_task_fields(record, status, waiting_for(awaited[0]) if awaited else None))

    async def _first_stop(self, caller: Caller, sent: Sent) -> Paused | Ended | None:
        """Where the run first stops for its client: a pause with questions it can show, its end, or (None) a wait
        for other people's approval, which a task waits out better than a request held open."""
        driver = PauseDriver(self.conversations, caller, lambda e: e.mode in caller.modes)
        stopped: Paused | Ended | None = None
        with anyio.CancelScope() as following:

            async def status(_: str) -> None:
                if await approvals_awaited(self.conversations.backend, sent.run_id, caller.user_id):
                    following.cancel()

            stopped = await driver.follow(sent.conversation_id, sent.run_id, sent.after, _later, status=status)
            if stopped is None:
                raise MCPError(mt.INTERNAL_ERROR, "The run's stream ended before the run did.")
        return stopped

    # -- what a task is now

    async def seen(self, caller: Caller, record: TaskRecord) -> Seen:
        """The task's status, read from its run: input_required while the run waits on questions its client can
        show, working while it goes on otherwise, and its end (kept once seen)."""
        if record.ended is not None:
            return Seen(**record.ended)
        if record.cancelled:
            await self._stop(caller, record)
            return Seen("cancelled")
        try:
            conversation = await self.conversations.get(caller, record.conversation_id)
        except HubError as exc:
            return await self._end(record, Seen("failed", error={"code": mt.INTERNAL_ERROR, "message": str(exc)}))
        if conversation.active_run_id == record.run_id:
            pending = await self.conversations.pending(caller, record.conversation_id)
            questions = await self._driver(caller, record).open(e.id for e in pending)
            if questions:
                return Seen("input_required", questions)
            awaited = await approvals_awaited(self.conversations.backend, record.run_id, caller.user_id)
            return Seen("working", message=waiting_for(awaited[0]) if awaited else None)
        ended: Paused | Ended | None = None
        with anyio.move_on_after(ENDED_S):
            following = self._driver(caller, record)
            ended = await following.follow(record.conversation_id, record.run_id, record.after, _go_on)
        if not isinstance(ended, Ended):
            return Seen("working")  # its end is not in the log yet
        result = _finish(record.direct)(record.conversation_id, ended, set(record.modes))
        return await self._end(record, Seen("completed", result=_dump(result)))

    async def _end(self, record: TaskRecord, seen: Seen) -> Seen:
        await self.records.save(record.with_(ended={"status": seen.status, "result": seen.result, "error": seen.error}))
        return seen

    def _driver(self, caller: Caller, record: TaskRecord) -> PauseDriver:
        return PauseDriver(self.conversations, caller, lambda e: e.mode in record.modes)

    async def _stop(self, caller: Caller, record: TaskRecord) -> None:
        await self.conversations.stop(caller, record.conversation_id, record.run_id)

    # -- tasks/* requests

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        caller, record = await self._owned(ctx, params.task_id)
        seen = await self.seen(caller, record)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return mt.GetTaskResult(**_core_task(record, seen.status, seen.message).model_dump())
        requests = {e.id: _dump(elicit_request(e)) for e in seen.questions} if seen.questions else None
        return DetailedTask(
            **_task_fields(record, seen.status, seen.message),
            input_requests=requests,
            result=seen.result,
            error=seen.error,
        )

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> HandlerResult:
        """Answers the task's open questions: all checked first (a field error, or an answer to a question of the
        task past its deadline, fails the update and changes nothing); a key that is not an open question of the
        task is otherwise ignored, so a repeated update is harmless."""
        caller, record = await self._owned(ctx, params.task_id)
        outstanding = {e.id: e for e in (await self.seen(caller, record)).questions}
        answers: list[tuple[str, Answer]] = []
        try:
            for key, response in params.input_responses.items():
                question = outstanding.get(key)
                if question is None:
                    await self._unless_expired(caller, record, key)
                    continue
                if not isinstance(response, mt.ElicitResult):
                    why = f"inputResponses.{key}: the answer to a question is an ElicitResult."
                    raise MCPError(mt.INVALID_PARAMS, why)
                answer = Answer(response.action, response.content)
                if ends_with_sign_in(question, answer):
                    continue  # the person goes to the link; the sign-in completes there
                await self.conversations.check(caller, key, answer)
                answers.append((key, answer))
        except InvalidContent as exc:
            raise MCPError(mt.INVALID_PARAMS, refusal(exc), {"fields": field_errors(exc)}) from None
        except Expired as exc:
            raise MCPError(mt.INVALID_PARAMS, str(exc), expiry(exc)) from None
        for key, answer in answers:
            with contextlib.suppress(AlreadyResolved, Expired):  # it ended otherwise meanwhile
                await self.conversations.answer(caller, key, answer)
        return {}

    async def _unless_expired(self, caller: Caller, record: TaskRecord, key: str) -> None:
        """Raises Expired when `key` names a question of the task's conversation past its deadline (its delegated
        runs' included): an answer to it fails the update, as on every surface (REST's 410), though the task no
        longer shows it."""
        try:
            question = await self.conversations.question(caller, key)
        except NotFound:
            return
        due = question.state is State.PENDING and not is_open(question)
        if question.conversation_id == record.conversation_id and (question.state is State.EXPIRED or due):
            raise Expired(key)

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        """Ends the task's open questions (the run's tool call gets the cancellation, and the run ends); the task
        reads as cancelled from now on, unless it had ended already."""
        caller, record = await self._owned(ctx, params.task_id)
        seen = await self.seen(caller, record)
        if seen.status not in TERMINAL:
            record = record.with_(cancelled=True)
            await self.records.save(record)
            await self._stop(caller, record)
            seen = Seen("cancelled")
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return {}
        return mt.CancelTaskResult(**_core_task(record, seen.status).model_dump())

    async def result(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        """2025-11-25: waits for the task's end, asking its questions on this request's stream, marked as the
        task's; its result, or an error when it was cancelled or failed."""
        caller, record = await self._owned(ctx, params.task_id)
        task_id = record.task_id

        async def ask(paused: Paused) -> bool:
            for question in paused.questions:
                await ask_back(self.conversations, ctx.session, ctx.request_id, caller, question, task_id)
            return True  # answered here: the run goes on

        if record.ended is None and not record.cancelled:
            driver = self._driver(caller, record)
            await driver.follow(record.conversation_id, record.run_id, record.after, ask)
        found = await self.records.get(record.user_id, task_id)
        seen = await self.seen(caller, found or record)
        if seen.status == "cancelled":
            raise MCPError(mt.INVALID_PARAMS, f"Task {task_id} was cancelled.")
        if seen.status != "completed":
            error = seen.error or {"code": mt.INTERNAL_ERROR, "message": f"Task {task_id} did not finish."}
            raise MCPError(int(error["code"]), str(error["message"]))
        return {**(seen.result or {}), "_meta": {RELATED_TASK: {"taskId": task_id}}}

    async def listed(self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams) -> HandlerResult:
        """2025-11-25: the caller's own tasks still kept, newest first, `PAGE` at a time; `nextCursor` reads on."""
        caller = self._caller(ctx)
        assert caller.user_id is not None
        before = None if params.cursor is None else _position(params.cursor)
        entries = await self.records.listed(caller.user_id, PAGE + 1, before)  # one more: is there a next page?
        page = entries[:PAGE]
        tasks = []
        for entry in page:
            record = await self.records.get(caller.user_id, entry.value)
            if record is not None:
                tasks.append(_core_task(record, (await self.seen(caller, record)).status))
        return mt.ListTasksResult(tasks=tasks, next_cursor=_cursor(page[-1]) if len(entries) > PAGE else None)

    async def _owned(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> tuple[Caller, TaskRecord]:
        """The caller and their task: another user's, or one no longer kept, is unknown."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            require_client_extension(ctx, TASKS_EXTENSION)
        caller = self._caller(ctx)
        record = None if caller.user_id is None else await self.records.get(caller.user_id, task_id)
        if record is None:
            raise MCPError(UNKNOWN_TASK, f"Failed to retrieve task: no task {task_id} (unknown, or expired).")
        return Caller(caller.user_id, bool(record.modes), "mcp", frozenset(record.modes)), record

    def _caller(self, ctx: ServerRequestContext[Any, Any], modes: set[str] | None = None) -> Caller:
        user = user_of(getattr(ctx.request, "headers", None), self.user_for)
        if user is None:
            raise MCPError(mt.INVALID_REQUEST, "No user: send a bearer token of one of the hub's users.")
        modes = modes or set()
        return Caller(user, supports_elicitation=bool(modes), surface="mcp", modes=frozenset(modes))

    # -- where the SDK hands the hub each shape

    def methods(self) -> list[MethodBinding]:
        core, modern = frozenset({CORE_TASKS}), frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskParams, self.get),
            MethodBinding("tasks/cancel", TaskParams, self.cancel),
            MethodBinding("tasks/update", UpdateParams, self.update, modern),
            MethodBinding("tasks/result", TaskParams, self.result, core),
            MethodBinding("tasks/list", mt.PaginatedRequestParams, self.listed, core),
        ]


def _finish(direct: bool) -> Finish:
    return direct_result if direct else call_result


async def _later(_: Paused) -> bool:
    """A task's client answers its questions in later requests (tasks/update)."""
    return False


async def _go_on(_: Paused) -> bool:
    return True


def _dump(model: mt.Result | mt.Request[Any, Any]) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


def _cursor(last: Entry) -> str:
    """`tasks/list`'s cursor: where the page ended, opaque to the client. It only bounds a listing of the caller's
    own tasks, so a cursor made up or passed to another user reveals nothing."""
    return base64.urlsafe_b64encode(json.dumps(list(last)).encode()).decode()


def _position(cursor: str) -> Entry:
    try:
        expires_ms, task_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError):
        expires_ms = task_id = None
    if type(expires_ms) is not int or not 0 <= expires_ms < 2**63 or not isinstance(task_id, str):
        raise MCPError(mt.INVALID_PARAMS, "tasks/list: unknown cursor; pass a `nextCursor` as it came, or none.")
    return Entry(expires_ms, task_id)


def _task_fields(record: TaskRecord, status: Status, message: str | None = None) -> dict[str, Any]:
    return {
        "task_id": record.task_id,
        "status": status,
        "status_message": message,
        "created_at": _iso(record.created_at),
        "last_updated_at": _iso(record.updated_at),
        "ttl_ms": int(record.ttl_s * 1000),
        "poll_interval_ms": POLL_MS,
    }


def _core_task(record: TaskRecord, status: Status, message: str | None = None) -> mt.Task:
    fields = _task_fields(record, status)
    return mt.Task(
        task_id=record.task_id,
        status=status,
        status_message=message,
        created_at=fields["created_at"],
        last_updated_at=fields["last_updated_at"],
        ttl=fields["ttl_ms"],
        poll_interval=POLL_MS,
    )
