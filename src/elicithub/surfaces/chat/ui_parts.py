"""The AI SDK UI message stream's parts (its UIMessageChunk, protocol v1) as the hub writes them, and the parts of
the events that show the same to every reader."""

from __future__ import annotations

from typing import Literal, TypedDict

from elicithub.core.events import (
    ApprovalPendingEvent,
    ElicitationRequested,
    ElicitationResolved,
    RequestEvent,
    ResolvedEvent,
    ToolCallFinished,
    ToolStatus,
    asked_event,
    resolved_event,
)
from elicithub.core.jsoncodec import JsonObject, dumps_event

# The parts the stream writes, in the AI SDK's shapes (its UIMessageChunk): the hub's tools are `dynamic` ones.


class StartPart(TypedDict):
    type: Literal["start"]
    messageId: str


class MarkPart(TypedDict):
    type: Literal["start-step", "finish-step", "finish"]


Bound = Literal["text-start", "text-end", "reasoning-start", "reasoning-end"]


class BoundPart(TypedDict):
    """Where a text or reasoning part starts or ends; its pieces go between, with its id."""

    type: Bound
    id: str


class DeltaPart(TypedDict):
    type: Literal["text-delta", "reasoning-delta"]
    id: str
    delta: str


class ToolInputStartPart(TypedDict):
    type: Literal["tool-input-start"]
    toolCallId: str
    toolName: str
    dynamic: Literal[True]


class ToolInputDeltaPart(TypedDict):
    type: Literal["tool-input-delta"]
    toolCallId: str
    inputTextDelta: str


class ToolInputPart(TypedDict):
    type: Literal["tool-input-available"]
    toolCallId: str
    toolName: str
    input: JsonObject
    dynamic: Literal[True]


class ToolInputErrorPart(TypedDict):
    """A call whose input streamed but was never made: its model turn ended before the call was complete."""

    type: Literal["tool-input-error"]
    toolCallId: str
    toolName: str
    input: str
    errorText: str
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


class ModelStatusData(TypedDict):
    message: str


class ModelStatusPart(TypedDict):
    """What the model's request does now (a retry and its wait): transient, so the AI SDK passes it to `onData` and
    keeps it out of the message, which it would outlive."""

    type: Literal["data-model-status"]
    data: ModelStatusData
    transient: Literal[True]


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
    | BoundPart
    | DeltaPart
    | ToolInputStartPart
    | ToolInputDeltaPart
    | ToolInputPart
    | ToolInputErrorPart
    | ToolOutputPart
    | ToolErrorPart
    | ToolDeniedPart
    | ToolApprovalPart
    | ToolStatusPart
    | ModelStatusPart
    | QuestionPart
    | ResolvedPart
)


def encode(part: UIPart) -> str:
    return dumps_event(part)


def tool_output(event: ToolCallFinished, denied: bool = False) -> str:
    if denied:
        # AI SDK 6 keeps a denied call's part as `output-denied`, with the approval's reason and no text.
        return encode({"type": "tool-output-denied", "toolCallId": event.call_id})
    if event.is_error:
        return encode(
            {"type": "tool-output-error", "toolCallId": event.call_id, "errorText": event.text, "dynamic": True}
        )
    return encode({"type": "tool-output-available", "toolCallId": event.call_id, "output": event.text, "dynamic": True})


def tool_status(event: ToolStatus) -> str:
    # One id per call: a client that keeps data parts by id (the AI SDK does) holds the latest status only.
    data: ToolStatusData = {"toolCallId": event.call_id, "message": event.text}
    return encode({"type": "data-tool-status", "id": f"{event.call_id}-status", "data": data})


def question(event: ElicitationRequested) -> str:
    data = asked_event(event.elicitation)
    kind: Literal["data-elicitation-request", "data-approval-pending"] = (
        "data-elicitation-request" if data["type"] == "elicitation-request" else "data-approval-pending"
    )
    return encode({"type": kind, "id": data["elicitationId"], "data": data})


def resolved(event: ElicitationResolved) -> str:
    ended = resolved_event(event.elicitation_id, event.outcome, event.answered_by)
    return encode({"type": "data-elicitation-resolved", "id": event.elicitation_id, "data": ended})


def approval_request(event: ElicitationRequested, call_id: str) -> str:
    return encode({"type": "tool-approval-request", "approvalId": event.elicitation.id, "toolCallId": call_id})
