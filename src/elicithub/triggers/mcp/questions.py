"""Turning one tool call's MCP elicitation requests (either era) into the hub's questions, asked through its Asker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from urllib.parse import urlsplit

import mcp_types as mt

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Action, Elicitation, Outcome, QuestionContext, new_elicitation
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Pause, RerunState
from elicithub.core.schema import SchemaError, validate_requested_schema
from elicithub.core.waiting import Resolution
from elicithub.errors import QuestionRefused
from elicithub.runtime.asker import Asker
from elicithub.runtime.tools import CallContext, cannot_ask, stopped_call
from elicithub.triggers.mcp.pauses import McpState, TaskState


class Question:
    """One tool call's questions, in either era."""

    def __init__(self, broker: Broker, context: CallContext, server_id: str, tool: str, timeout_s: float) -> None:
        self.broker = broker
        self.context = context
        self.server_id = server_id
        self.tool = tool
        self.timeout_s = timeout_s
        self.failure: str | None = None
        """Set when a question ended the call on our side (unsupported, expired, the run stopped); it becomes the
        tool error, and the call goes no further downstream."""
        self.asked = False
        """Whether the call has asked anything yet (so the server saw it: it must not be sent again)."""
        self.task_id: str | None = None
        """The downstream task the call became, named in its questions' context."""
        self.task_state: TaskState | None = None
        """What a 2025-11-25 task's question records on the pause (in place of a rerun)."""
        self.cancel_task: Callable[[], Awaitable[object]] | None = None
        """Cancels the 2025-11-25 task when the person cancels its question (or it expires)."""
        self.round_ids: dict[str, str] = {}
        """The hub's elicitation ids of the last round asked, by the server's keys."""

    @property
    def asker(self) -> Asker:
        assert self.context.asker is not None  # build() refuses first when the call cannot ask
        return self.context.asker

    def build(self, params: mt.ElicitRequestParams) -> Elicitation:
        name = f"{self.server_id}.{self.tool}"
        mode = "url" if isinstance(params, mt.ElicitRequestURLParams) else "form"
        if not self.context.can_show(mode) or self.context.user_id is None:
            needs = f"Tool {name} needs input from the user ({params.message!r})"
            raise QuestionRefused(cannot_ask(self.context, needs, mode))
        context: QuestionContext = {"trigger": "mcp_elicitation", "serverId": self.server_id, "toolName": self.tool}
        if self.task_id is not None:
            context["taskId"] = self.task_id
        question = partial(
            new_elicitation,
            conversation_id=self.context.conversation_id,
            user_id=self.context.user_id,
            run_id=self.context.run_id,
            message=params.message,
            timeout_s=self.timeout_s,
            context=context,
        )
        if isinstance(params, mt.ElicitRequestURLParams):
            parts = urlsplit(params.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise QuestionRefused(
                    f"Tool {name} asked the user to open a link that is not http(s); it was not shown."
                )
            return question(mode="url", url=params.url)
        schema: JsonObject = dict(params.requested_schema)
        try:
            validate_requested_schema(schema)
        except SchemaError as exc:
            raise QuestionRefused(f"Tool {name} asked an invalid question: {exc}") from None
        return question(mode="form", requested_schema=schema)

    def result(self, elicitation: Elicitation, resolution: Resolution) -> mt.ElicitResult:
        if resolution.outcome == "expired":
            self.failure = (
                f"The user did not answer {elicitation.message!r} within {self.timeout_s:g} s; "
                f"the call to {self.server_id}.{self.tool} was not completed."
            )
            return mt.ElicitResult(action="cancel")
        if resolution.outcome == "cancelled" and self.asker.stopped:
            self.failure = stopped_call(f"{self.server_id}.{self.tool}")
            return mt.ElicitResult(action="cancel")  # only a question still open downstream hears it
        action = _ACTIONS[resolution.outcome]
        content = resolution.content if action == "accept" and elicitation.mode == "form" else None
        return mt.ElicitResult(action=action, content=content)

    async def ask(self, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        """A 2025-11-25 question: its open request cannot outlive us, so after a restart the call runs again (or,
        in a task, the task's `tasks/result` is read again, and the server asks the same again)."""
        self.asked = True
        elicitation = self.build(params)
        state: TaskState | RerunState = self.task_state or {"kind": "rerun"}
        [resolution] = await self.asker.ask([elicitation], trigger="mcp", state=state)
        result = self.result(elicitation, resolution)
        if result.action == "cancel" and self.cancel_task is not None:
            await self.cancel_task()
        return result

    async def ask_round(self, requests: dict[str, mt.ElicitRequest], state: McpState) -> dict[str, mt.ElicitResult]:
        """A round of questions asked together, `state` recorded on the run's pause (how to go on after a restart).
        Nothing is open downstream while it waits (the server has answered, or a task's poll is done), so the run
        may park meanwhile."""
        self.asked = True
        keys = list(requests)
        elicitations = [self.build(requests[k].params) for k in keys]
        resolutions = await self.asker.ask(elicitations, trigger="mcp", keys=keys, state=state, resumable=True)
        self.round_ids = {k: r.elicitation_id for k, r in zip(keys, resolutions, strict=True)}
        return {k: self.result(e, r) for k, e, r in zip(keys, elicitations, resolutions, strict=True)}

    async def note(self, state: TaskState, elicitation_ids: dict[str, str] | None = None) -> None:
        """Records where the call is on the run's pause without asking (a call that cannot ask has no run to
        resume: nothing to record)."""
        if self.context.asker is not None:
            await self.context.asker.checkpoint("mcp", state, elicitation_ids)

    async def still_wanted(self) -> bool:
        """Whether the run still has its conversation (a new message moves it on)."""
        return self.context.asker is None or await self.context.asker.active()

    async def answers_to(self, pause: Pause) -> dict[str, mt.ElicitResult]:
        """The answers to a round asked before a restart: waits for any still open."""
        answers: dict[str, mt.ElicitResult] = {}
        for key, resolution in (await self.asker.answers(pause, resumable=True)).items():
            elicitation = None if resolution is None else await self.broker.store.get(resolution.elicitation_id)
            if resolution is None or elicitation is None:
                answers[key] = mt.ElicitResult(action="cancel")
            else:
                answers[key] = self.result(elicitation, resolution)
        return answers


_ACTIONS: dict[Outcome, Action] = {"accepted": "accept", "declined": "decline", "cancelled": "cancel"}
"""The answer a server hears for a question that ended without expiring."""
