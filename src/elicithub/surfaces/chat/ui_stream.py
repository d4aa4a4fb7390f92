"""The AI SDK UI message stream (protocol v1): text, tool and data parts, then finish and [DONE].

With native approvals (AI SDK 6), a question approving the person's own tool call is a `tool-approval-request` for
that call, and the stream ends when the run pauses on such questions alone: the AI SDK client answers with an
`approval-responded` tool part in its next request (surfaces/chat/ui_approvals.py), whose stream goes on with the same
assistant message."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal, TypedDict

from elicithub.core.elicitation import new_id
from elicithub.core.events import (
    ApprovalPendingEvent,
    ElicitationRequested,
    ElicitationResolved,
    RequestEvent,
    ResolvedEvent,
    RunFinished,
    RunPaused,
    StepStarted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolStatus,
    asked_event,
    framed,
    resolved_event,
)
from elicithub.core.jsoncodec import JsonObject, dumps_event
from elicithub.core.runs import ToolCall

HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
DONE = "[DONE]"


# The parts this stream writes, in the AI SDK's shapes (its UIMessageChunk): the hub's tools are `dynamic` ones.


class StartPart(TypedDict):
    type: Literal["start"]
    messageId: str


class MarkPart(TypedDict):
    type: Literal["start-step", "finish-step", "finish"]


class TextPart(TypedDict):
    type: Literal["text-start", "text-end"]
    id: str


class TextDeltaPart(TypedDict):
    type: Literal["text-delta"]
    id: str
    delta: str


class ToolInputPart(TypedDict):
    type: Literal["tool-input-available"]
    toolCallId: str
    toolName: str
    input: JsonObject
    dynamic: Literal[True]


class ToolOutputPart(TypedDict):
    type: Literal["tool-output-available"]
    toolCallId: str
    output: str
    dynamic: Literal[True]


class ToolErrorPart(TypedDict):
    type: Literal["tool-output-error"]
    toolCallId: str
    errorText: str
    dynamic: Literal[True]


class ToolDeniedPart(TypedDict):
    type: Literal["tool-output-denied"]
    toolCallId: str


class ToolApprovalPart(TypedDict):
    type: Literal["tool-approval-request"]
    approvalId: str
    toolCallId: str


class ToolStatusData(TypedDict):
    """What a call that works on says it is doing now (the latest one a client keeps, by the part's id)."""

    toolCallId: str
    message: str


class ToolStatusPart(TypedDict):
    type: Literal["data-tool-status"]
    id: str
    data: ToolStatusData


class QuestionPart(TypedDict):
    type: Literal["data-elicitation-request", "data-approval-pending"]
    id: str
    data: RequestEvent | ApprovalPendingEvent


class ResolvedPart(TypedDict):
    type: Literal["data-elicitation-resolved"]
    id: str
    data: ResolvedEvent


UIPart = (
    StartPart
    | MarkPart
    | TextPart
    | TextDeltaPart
    | ToolInputPart
    | ToolOutputPart
    | ToolErrorPart
    | ToolDeniedPart
    | ToolApprovalPart
    | ToolStatusPart
    | QuestionPart
    | ResolvedPart
)


def _part(part: UIPart) -> str:
    return dumps_event(part)


def _tool_output(event: ToolCallFinished, denied: bool = False) -> str:
    if denied:
        # AI SDK 6 keeps a denied call's part as `output-denied`, with the approval's reason and no text.
        return _part({"type": "tool-output-denied", "toolCallId": event.call_id})
    if event.is_error:
        return _part(
            {"type": "tool-output-error", "toolCallId": event.call_id, "errorText": event.text, "dynamic": True}
        )
    return _part({"type": "tool-output-available", "toolCallId": event.call_id, "output": event.text, "dynamic": True})


def _status(event: ToolStatus) -> str:
    # One id per call: a client that keeps data parts by id (the AI SDK does) holds the latest status only.
    data: ToolStatusData = {"toolCallId": event.call_id, "message": event.text}
    return _part({"type": "data-tool-status", "id": f"{event.call_id}-status", "data": data})


def _request(event: ElicitationRequested) -> str:
    data = asked_event(event.elicitation)
    kind: Literal["data-elicitation-request", "data-approval-pending"] = (
        "data-elicitation-request" if data["type"] == "elicitation-request" else "data-approval-pending"
    )
    return _part({"type": kind, "id": data["elicitationId"], "data": data})


def _resolved(event: ElicitationResolved) -> str:
    resolved = resolved_event(event.elicitation_id, event.outcome, event.answered_by)
    return _part({"type": "data-elicitation-resolved", "id": event.elicitation_id, "data": resolved})


def _approval_request(event: ElicitationRequested, call_id: str) -> str:
    return _part({"type": "tool-approval-request", "approvalId": event.elicitation.id, "toolCallId": call_id})


class UIMessageStreamWriter:
    """`native_approvals`: see the module's docstring. `still_open`: on a stream that reads a run again, the questions
    open when it began (a pause on questions answered since does not end it); None: every pause is a live one.
    `continues`: the call whose approval the client has just answered in the assistant message `message_id` it sent
    back; the stream goes on with that message, in its open step, where the call's part is (its input is not sent
    again). `denied`: that answer denied the call (its refusal is `tool-output-denied`)."""

    event_ids = True

    def __init__(
        self,
        message_id: str | None = None,
        *,
        native_approvals: bool = False,
        still_open: Collection[str] | None = None,
        continues: str | None = None,
        denied: bool = False,
    ) -> None:
        self.message_id = message_id or new_id("msg")
        self.native_approvals = native_approvals
        self.still_open = still_open
        self.denied = denied
        self._continued = continues
        """The continued call, until the first call ends (it is that one)."""
        self._input_held = continues is not None
        """The client's message holds the continued call's input: the stream does not send it again."""
        self.ended = False
        self._text_id: str | None = None
        self._texts = 0
        self._in_step = continues is not None
        self._call: str | None = None
        """The tool call under way, whose questions these are."""
        self._native: set[str] = set()
        """The questions sent as `tool-approval-request`."""

    def start(self) -> list[str]:
        return [_part({"type": "start", "messageId": self.message_id})]

    def _end_text(self) -> list[str]:
        if self._text_id is None:
            return []
        part = _part({"type": "text-end", "id": self._text_id})
        self._text_id = None
        return [part]

    def _step(self) -> list[str]:
        """Open a step before content that comes outside one (a stream that continues a run starts mid-step)."""
        if self._in_step:
            return []
        self._in_step = True
        return [_part({"type": "start-step"})]

    def _end_step(self) -> list[str]:
        if not self._in_step:
            return []
        self._in_step = False
        return [*self._end_text(), _part({"type": "finish-step"})]

    def write(self, event: StreamEvent) -> list[str]:
        if isinstance(event, StepStarted):
            return [*self._end_step(), *self._step()]
        if isinstance(event, TextDelta):
            out = self._step()
            if self._text_id is None:
                self._texts += 1
                self._text_id = f"{self.message_id}_t{self._texts}"
                out.append(_part({"type": "text-start", "id": self._text_id}))
            out.append(_part({"type": "text-delta", "id": self._text_id, "delta": event.text}))
            return out
        if isinstance(event, ToolCall) and self._input_held and event.call_id == self._continued:
            self._input_held = False  # once: a later call of the same id is a new one
            self._call = event.call_id
            return []
        if isinstance(event, ToolCall):
            # Tools come from MCP servers the client does not know of: dynamic tools, in AI SDK terms.
            part: ToolInputPart = {
                "type": "tool-input-available",
                "toolCallId": event.call_id,
                "toolName": event.name,
                "input": event.arguments,
                "dynamic": True,
            }
            self._call = event.call_id
            return [*self._step(), *self._end_text(), _part(part)]
        if isinstance(event, ToolStatus):
            return [*self._step(), *self._end_text(), framed(event, "ui", lambda: _status(event))]
        if isinstance(event, ToolCallFinished):
            self._call = None
            continued, self._continued = event.call_id == self._continued, None
            if continued and self.denied and event.is_error:
                return [*self._step(), _tool_output(event, denied=True)]
            return [*self._step(), framed(event, "ui", lambda: _tool_output(event))]
        if isinstance(event, ElicitationRequested):
            if self._native_approval(event):
                assert self._call is not None
                self._native.add(event.elicitation.id)
                # Not `framed`: the frame names the call this stream showed, which another reader may not have seen.
                return [*self._step(), *self._end_text(), _approval_request(event, self._call)]
            return [*self._step(), *self._end_text(), framed(event, "ui", lambda: _request(event))]
        if isinstance(event, ElicitationResolved):
            return [framed(event, "ui", lambda: _resolved(event))]
        if isinstance(event, RunPaused) and self._waits_for_client(event):
            self.ended = True
            return self.end()
        if isinstance(event, RunFinished):
            return self.end()
        return []  # RunStarted, RunPaused: nothing to show

    def _native_approval(self, event: ElicitationRequested) -> bool:
        """Whether the question goes as AI SDK 6's approval of the call under way: an approval its requester
        answers, asked within a call this stream showed."""
        asked = event.elicitation
        if not (self.native_approvals and asked.approval is not None and asked.asks_requester and self._call):
            return False
        # Read again once answered, it goes as before: how it was answered, which AI SDK 6 would want, is not known.
        return self.still_open is None or asked.id in self.still_open

    def _waits_for_client(self, event: RunPaused) -> bool:
        """The run waits for approvals only the client's next request answers (nothing more comes on this stream)."""
        ids = set(event.elicitation_ids)
        return bool(ids) and ids <= self._native

    def end(self) -> list[str]:
        return [*self._end_step(), *self._end_text(), _part({"type": "finish"}), DONE]
