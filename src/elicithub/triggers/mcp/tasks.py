"""Following a downstream MCP task to its end: polled within the server's interval, each `input_required` round
asked of the person through the call's Question, answered in the shape the server speaks, cancelled when the person
cancels, a question expires or the conversation moves on. Where the task is (its id, the keys answered) is recorded
on the run's pause, so a restarted hub, or another instance taking the run over, goes on with the same task."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as mt
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Pause
from elicithub.errors import QuestionRefused
from elicithub.protocol.mcp_rounds import RoundsExceeded
from elicithub.protocol.mcp_task_requests import (
    Anything,
    CancelTask,
    GetTask,
    InputResponse,
    InputResponseParams,
    TaskResult,
    UpdateTask,
)
from elicithub.protocol.mcp_tasks import UNKNOWN_TASK, TaskHandle, TaskParams, TaskSnapshot, UpdateParams
from elicithub.triggers.mcp.pauses import Shape, TaskState
from elicithub.triggers.mcp.questions import Question

log = logging.getLogger(__name__)

DEFAULT_POLL_S = 1.0
"""How often a task is polled when its server suggests no interval."""
MAX_POLL_S = 10.0
"""The longest wait between two polls, whatever the server suggests: a finished task is noticed soon."""
CANCEL_S = 10.0
TASK_TTL_MS = 24 * 3600 * 1000
"""What a 2025-11-25 task is asked to be kept for (the server may keep it for less)."""

Sleep = Callable[[float], Awaitable[None]]
Fulfil = Callable[[mt.InputRequiredResult, TaskState], Awaitable[mt.InputResponses]]
"""Answers one round (its elicitations asked of the person), recording `state` on the run's pause."""


@dataclass
class TaskProgress:
    """Where a task stands for the hub; its `state()` is what the run's pause records."""

    task_id: str
    shape: Shape
    answered: list[str] = field(default_factory=list)  # every input request key answered over the task's life
    rounds: int = 0
    interval_ms: int | None = None
    old_update: bool = False  # a draft server that does not know tasks/update

    def state(self, request_state: str | None = None) -> TaskState:
        return {
            "kind": "task",
            "task_id": self.task_id,
            "shape": self.shape,
            "answered": list(self.answered),
            "rounds": self.rounds,
            "old_update": self.old_update,
            "request_state": request_state,
        }

    @classmethod
    def from_pause(cls, pause: Pause) -> TaskProgress:
        state = pause.state
        return cls(
            task_id=str(state["task_id"]),
            shape=state["shape"],
            answered=list(state.get("answered", [])),
            rounds=int(state.get("rounds", 0)),
            old_update=bool(state.get("old_update", False)),
        )

    @classmethod
    def created(cls, handle: TaskHandle, shape: Shape) -> TaskProgress:
        return cls(task_id=handle.task_id, shape=shape, interval_ms=handle.poll_interval_ms)


def is_task_pause(pause: Pause | None) -> bool:
    return pause is not None and pause.state.get("kind") == "task"


def error_result(text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


async def start_core_task(session: ClientSession, tool: str, arguments: JsonObject) -> TaskHandle:
    """A 2025-11-25 `tools/call` with `task`, answered by `CreateTaskResult`. Sent below the SDK's typed path: it
    checks every 2025-11-25 `tools/call` result as a `CallToolResult`, which a `CreateTaskResult` is not."""
    data: JsonObject = {
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "task": {"ttl": TASK_TTL_MS}},
    }
    opts: Any = {}
    session._stamp(data, opts)
    raw = await session._dispatcher.send_raw_request("tools/call", data["params"], opts)
    created = mt.CreateTaskResult.model_validate(raw)
    task = created.task
    return TaskHandle(task_id=task.task_id, status=task.status, poll_interval_ms=task.poll_interval)


class TaskFollower:
    """One tool call's task, followed over the call's session."""

    def __init__(
        self,
        session: ClientSession,
        question: Question,
        fulfil: Fulfil,
        *,
        max_rounds: int,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self.session = session
        self.question = question
        self.fulfil = fulfil
        self.max_rounds = max_rounds
        self.sleep = sleep
        self.name = f"{question.server_id}.{question.tool}"
        self._said: str | None = None  # the task's status message last shown to the person

    async def follow(self, progress: TaskProgress, resume: Pause | None = None) -> mt.CallToolResult:
        """The task's result; a tool error when it failed, was cancelled, or its server forgot it."""
        question = self.question
        question.asked = True  # the server has the call: it is never sent again
        question.task_id = progress.task_id
        if resume is None:
            await question.note(progress.state())
        try:
            if progress.shape == "2025-11-25":
                return await self._core(progress)
            if resume is not None and resume.elicitation_ids:
                # Told or not before the interruption, the round's answers go again: a server ignores responses to
                # keys that are no longer outstanding.
                responses: mt.InputResponses = dict(await question.answers_to(resume))
                question.round_ids = dict(resume.elicitation_ids)
                ended = await self._answered(progress, responses, resume.state.get("request_state"))
                if ended is not None:
                    return ended
                question.asker.forget_earlier()  # later rounds ask new questions, however alike they read
            return await self._poll(progress)
        except MCPError as exc:
            if exc.code == UNKNOWN_TASK:
                return self._forgotten(progress)
            raise

    async def _poll(self, progress: TaskProgress) -> mt.CallToolResult:
        while True:
            snapshot = await self._get(progress)
            if snapshot.interval_ms is not None:
                progress.interval_ms = snapshot.interval_ms
            if snapshot.status == "completed":
                return mt.CallToolResult.model_validate(snapshot.result or {"content": []})
            if snapshot.status == "failed":
                error = snapshot.error or {}
                return error_result(f"Tool {self.name} failed: {error.get('message') or snapshot.status_message}")
            if snapshot.status == "cancelled":
                why = f": {snapshot.status_message}" if snapshot.status_message else "."
                return error_result(f"Tool {self.name} was cancelled by its server{why}")
            await self._show(snapshot.status_message)
            if snapshot.status == "input_required":
                ended = await self._round(progress, snapshot)
                if ended is not None:
                    return ended
            elif not await self.question.still_wanted():
                return await self._cancel(progress, f"The conversation moved on; {self.name} was cancelled.")
            await self.sleep(min(MAX_POLL_S, (progress.interval_ms or DEFAULT_POLL_S * 1000) / 1000))

    async def _round(self, progress: TaskProgress, snapshot: TaskSnapshot) -> mt.CallToolResult | None:
        """Asks what the task newly asks (keys seen before are not asked twice) and tells the server the answers;
        a result when the round ended the call."""
        request_state: str | None = None
        requests = snapshot.input_requests
        if requests is None:  # the earlier draft: the round is read from tasks/result
            progress.shape = "draft"
            waiting = await self.session.send_request(TaskResult(params=TaskParams(task_id=progress.task_id)), Anything)
            data = waiting.data()
            requests, request_state = data.get("inputRequests") or {}, data.get("requestState")
        fresh = {k: v for k, v in requests.items() if k not in progress.answered}
        if not fresh:
            return None  # answered already; the server has not caught up yet
        progress.rounds += 1
        if progress.rounds > self.max_rounds:
            await self._cancel(progress, "")
            raise RoundsExceeded(self.max_rounds)
        round_ = mt.InputRequiredResult.model_validate(
            {"inputRequests": fresh, "requestState": request_state, "resultType": "input_required"}
        )
        responses = await self.fulfil(round_, progress.state(request_state))
        return await self._answered(progress, responses, request_state)

    async def _answered(
        self, progress: TaskProgress, responses: mt.InputResponses, request_state: str | None
    ) -> mt.CallToolResult | None:
        """A round's answers, asked now or before the run was parked or interrupted: told to the server, or, when
        the person cancelled a question (or one expired), the task cancelled; a result when that ended the call."""
        if self.question.failure is not None:  # a question expired
            await self._cancel(progress, "")
            raise QuestionRefused(self.question.failure)
        if any(isinstance(r, mt.ElicitResult) and r.action == "cancel" for r in responses.values()):
            return await self._cancel(progress, f"The user cancelled the question; {self.name} was cancelled.")
        await self._answer(progress, responses, request_state)
        return None

    async def _answer(self, progress: TaskProgress, responses: mt.InputResponses, request_state: str | None) -> None:
        task_id = progress.task_id
        if not progress.old_update:
            try:
                update = UpdateTask(params=UpdateParams(task_id=task_id, input_responses=responses))
                await self.session.send_request(update, Anything)
            except MCPError as exc:
                if exc.code != mt.METHOD_NOT_FOUND:
                    raise
                progress.old_update = True
        if progress.old_update:
            params = InputResponseParams(task_id=task_id, input_responses=responses, request_state=request_state)
            await self.session.send_request(InputResponse(params=params), Anything)
        progress.answered.extend(k for k in responses if k not in progress.answered)
        # Keeps the round's questions on the pause: a resumed run tells them again, which the server ignores.
        await self.question.note(progress.state(request_state), self.question.round_ids)

    async def _core(self, progress: TaskProgress) -> mt.CallToolResult:
        """2025-11-25: `tasks/result` blocks until the task ends; its questions come on that stream as related-task
        `elicitation/create`, answered through the Question (which cancels the task when the person cancels)."""
        question = self.question
        question.task_state = progress.state()
        question.cancel_task = lambda: self._cancel(progress, "")
        try:
            raw = await self.session.send_request(TaskResult(params=TaskParams(task_id=progress.task_id)), Anything)
        except MCPError as exc:
            if exc.code == UNKNOWN_TASK:
                raise
            return error_result(f"Tool {self.name} did not finish: {exc.error.message}")
        return mt.CallToolResult.model_validate(raw.data())

    async def _show(self, status_message: str | None) -> None:
        """Show the person what the task says it is doing, each new status message once."""
        show = self.question.context.progress
        if status_message and status_message != self._said and show is not None:
            self._said = status_message
            await show(status_message)

    async def _get(self, progress: TaskProgress) -> TaskSnapshot:
        got = await self.session.send_request(GetTask(params=TaskParams(task_id=progress.task_id)), Anything)
        return TaskSnapshot.model_validate(got.data())

    async def _cancel(self, progress: TaskProgress, text: str) -> mt.CallToolResult:
        """Asks the server to cancel the task (cooperative: it may end otherwise); the call ends with `text`."""
        with contextlib.suppress(Exception), anyio.fail_after(CANCEL_S), anyio.CancelScope(shield=True):
            await self.session.send_request(CancelTask(params=TaskParams(task_id=progress.task_id)), Anything)
        log.info("cancelled task %s of %s", progress.task_id, self.name)
        return error_result(text)

    def _forgotten(self, progress: TaskProgress) -> mt.CallToolResult:
        return error_result(
            f"The MCP server {self.question.server_id} no longer knows task {progress.task_id} of {self.name} "
            "(it may have expired or the server restarted without it); the call did not finish."
        )
