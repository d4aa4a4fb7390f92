"""Turning one tool call's MCP elicitation requests (either era) into the hub's questions, asked through its Asker."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import mcp_types as mt

from elicithub.core.broker import Broker, Resolution
from elicithub.core.elicitation import Elicitation, new_elicitation
from elicithub.core.runs import Pause
from elicithub.core.schema import SchemaError, validate_requested_schema
from elicithub.errors import QuestionRefused
from elicithub.runtime.asker import Asker
from elicithub.runtime.tools import CallContext, cannot_ask


class Question:
    """One tool call's questions, in either era."""

    def __init__(self, broker: Broker, context: CallContext, server_id: str, tool: str, timeout_s: float) -> None:
        self.broker = broker
        self.context = context
        self.server_id = server_id
        self.tool = tool
        self.timeout_s = timeout_s
        self.failure: str | None = None
        """Set when a question ended the call on our side (unsupported, expired); it becomes the tool error."""
        self.asked = False
        """Whether the call has asked anything yet (so the server saw it: it must not be sent again)."""

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
                raise QuestionRefused(
                    f"Tool {name} asked the user to open a link that is not http(s); it was not shown."
                )
            return new_elicitation(mode="url", url=params.url, **common)
        schema: dict[str, Any] = dict(params.requested_schema)
        try:
            validate_requested_schema(schema)
        except SchemaError as exc:
            raise QuestionRefused(f"Tool {name} asked an invalid question: {exc}") from None
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
        self.asked = True
        elicitation = self.build(params)
        [resolution] = await self.asker.ask([elicitation], trigger="mcp", state={"kind": "rerun"})
        return self.result(elicitation, resolution)

    async def ask_all(
        self, requests: dict[str, mt.ElicitRequest], round_: mt.InputRequiredResult, rounds: int
    ) -> dict[str, mt.ElicitResult]:
        """One 2026-07-28 round: every question is shown at once and answered independently."""
        self.asked = True
        keys = list(requests)
        elicitations = [self.build(requests[k].params) for k in keys]
        state = {
            "kind": "mrtr",
            "request_state": round_.request_state,
            "input_requests": round_.model_dump(by_alias=True, mode="json", exclude_none=True),
            "rounds": rounds,
        }
        resolutions = await self.asker.ask(elicitations, trigger="mcp", keys=keys, state=state)
        return {k: self.result(e, r) for k, e, r in zip(keys, elicitations, resolutions, strict=True)}

    async def answers_to(self, pause: Pause) -> dict[str, mt.ElicitResult]:
        """The answers to a round asked before a restart: waits for any still open."""
        answers: dict[str, mt.ElicitResult] = {}
        for key, resolution in (await self.asker.answers(pause)).items():
            elicitation = None if resolution is None else await self.broker.store.get(resolution.elicitation_id)
            if resolution is None or elicitation is None:
                answers[key] = mt.ElicitResult(action="cancel")
            else:
                answers[key] = self.result(elicitation, resolution)
        return answers
