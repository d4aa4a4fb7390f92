"""The events a run puts on its conversation's log, independent of any wire format, and their JSON form."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Never, NotRequired, TypedDict

from elicithub.core.approval import PeopleJson
from elicithub.core.elicitation import Elicitation, ElicitationJson, Mode, Outcome, QuestionContext
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import ToolCall


@dataclass(frozen=True)
class RunStarted:
    """The first event of a run; `message_id` names the assistant message it writes (kept across replays)."""

    message_id: str


@dataclass(frozen=True)
class StepStarted:
    """A model step begins: its text and tool calls follow (the AI SDK frames them with start-step/finish-step).
    `turn` names the model turn whose text streams live (runtime/live.py) and ends in its `ModelSaid`."""

    turn: str = ""


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """Some of what a model thinks before it answers, as it comes (readers only: the log keeps `ModelSaid`)."""

    text: str


@dataclass(frozen=True)
class ToolInputDelta:
    """Some of a tool call's arguments as the model writes them (readers only); the `ToolCall` event follows with
    all of them."""

    call_id: str
    name: str
    text: str
    first: bool
    """The call's first piece: its input starts here."""


@dataclass(frozen=True)
class ModelSaid:
    """What a model turn said, written to the log once, when the turn ends: its readers got it piece by piece as
    it streamed, and a reader that follows later gets what it has not seen of it (runtime/stream.py)."""

    turn: str
    text: str
    reasoning: str = ""
    usage: TokenUsage | None = None


@dataclass(frozen=True)
class TokenUsage:
    """The tokens one model request read and wrote; readers get it after the turn's text (the OpenAI surface's
    `usage` chunk adds them up)."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class ModelStatus:
    """What the model's request is doing now, shown like a tool's status (`Model gpt is busy; retrying in 3 s.`)."""

    text: str


@dataclass(frozen=True)
class Framed:
    """An event whose frames depend on the event alone (no reader's state), so readers share them."""

    frames: dict[str, str] = field(default_factory=dict, init=False, compare=False, repr=False)
    """This event's frames as surfaces wrote them, by surface (see `framed`)."""


@dataclass(frozen=True)
class ToolCallFinished(Framed):
    call_id: str
    name: str
    text: str
    is_error: bool
    result: JsonObject | None = None
    """A direct call's result as its downstream MCP server gave it (ToolOutcome.result); None in an agent's run."""


@dataclass(frozen=True)
class ToolStatus(Framed):
    """What a tool call that works on says it is doing now (a downstream MCP task's status message)."""

    call_id: str
    text: str


@dataclass(frozen=True)
class ElicitationRequested(Framed):
    elicitation: Elicitation


@dataclass(frozen=True)
class ElicitationResolved(Framed):
    elicitation_id: str
    outcome: Outcome
    answered_by: str | None = None
    """Who answered, for an approval (someone other than the stream's person may have)."""


@dataclass(frozen=True)
class RunPaused:
    """The run now waits: every question of the round is on the stream, and these are their ids."""

    elicitation_ids: tuple[str, ...]


@dataclass(frozen=True)
class RunFinished:
    """The last event of a run."""

    reason: str = "stop"


StreamEvent = (
    RunStarted
    | StepStarted
    | TextDelta
    | ReasoningDelta
    | ToolInputDelta
    | ModelSaid
    | TokenUsage
    | ModelStatus
    | ToolCall
    | ToolStatus
    | ToolCallFinished
    | ElicitationRequested
    | ElicitationResolved
    | RunPaused
    | RunFinished
)


def framed(event: Framed, surface: str, encode: Callable[[], str]) -> str:
    """The frame `surface` writes for `event`, encoded once however many readers write it: every reader on the hub
    that wrote an event gets the one event object (`Logged`)."""
    frame = event.frames.get(surface)
    if frame is None:
        frame = event.frames[surface] = encode()
    return frame


class RequestEvent(TypedDict):
    """The public `elicitation-request` event that chat clients read (docs/concepts.md, "Events"): a form
    question has `requestedSchema`, a url one `url`."""

    type: Literal["elicitation-request"]
    elicitationId: str
    mode: Mode
    message: str
    requestedSchema: NotRequired[JsonObject | None]
    url: NotRequired[str | None]
    context: QuestionContext
    expiresAt: str


class ResolvedEvent(TypedDict):
    """The public `elicitation-resolved` event: how a question ended (and for an approval, who answered)."""

    type: Literal["elicitation-resolved"]
    elicitationId: str
    outcome: Outcome
    answeredBy: NotRequired[str]


class ApprovalPendingEvent(TypedDict):
    """The public `approval-pending` event: the requester's tool call waits for other people's approval (they see
    no question of their own to answer)."""

    type: Literal["approval-pending"]
    elicitationId: str
    approvers: PeopleJson | dict[str, Never]
    """`{}` for an approval stored without approvers (one made by this version always has them)."""
    expiresAt: str
    context: QuestionContext


class AnswerEvent(TypedDict):
    """An answer as it travels: the body of `POST /run/api/elicitation-responses` (which names the conversation),
    or the `elicitationResponse` data part one hub sends another."""

    elicitationId: str
    action: str
    conversationId: NotRequired[str | None]
    content: NotRequired[JsonObject]


def request_event(elicitation: Elicitation) -> RequestEvent:
    event: RequestEvent = {
        "type": "elicitation-request",
        "elicitationId": elicitation.id,
        "mode": elicitation.mode,
        "message": elicitation.message,
        "context": elicitation.context,
        "expiresAt": elicitation.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if elicitation.mode == "form":
        event["requestedSchema"] = elicitation.requested_schema
    else:
        event["url"] = elicitation.url
    return event


def pending_event(elicitation: Elicitation) -> ApprovalPendingEvent:
    approval = elicitation.approval
    approvers: PeopleJson | dict[str, Never] = (
        approval.approvers.to_json() if approval is not None and approval.approvers is not None else {}
    )
    return {
        "type": "approval-pending",
        "elicitationId": elicitation.id,
        "approvers": approvers,
        "expiresAt": elicitation.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "context": elicitation.context,
    }


def asked_event(elicitation: Elicitation) -> RequestEvent | ApprovalPendingEvent:
    """What its run's stream shows of a question: the question, or for an approval its person does not answer, that
    the call waits for it."""
    return request_event(elicitation) if elicitation.asks_requester else pending_event(elicitation)


def resolved_event(elicitation_id: str, outcome: Outcome, answered_by: str | None = None) -> ResolvedEvent:
    event: ResolvedEvent = {"type": "elicitation-resolved", "elicitationId": elicitation_id, "outcome": outcome}
    if answered_by is not None:
        event["answeredBy"] = answered_by
    return event


# The stored form of each event: what the event log keeps (each with `run` added, see `Logged`).


class RunStartedJson(TypedDict):
    type: Literal["run-started"]
    messageId: str


class StepStartedJson(TypedDict):
    type: Literal["step-started"]
    turn: NotRequired[str]


class ModelSaidJson(TypedDict):
    type: Literal["model-said"]
    turn: str
    text: str
    reasoning: NotRequired[str]
    usage: NotRequired[list[int]]
    """[input tokens, output tokens]"""


class ModelStatusJson(TypedDict):
    type: Literal["model-status"]
    text: str


class TextJson(TypedDict):
    type: Literal["text"]
    text: str


class ToolStartedJson(TypedDict):
    type: Literal["tool-started"]
    callId: str
    name: str
    arguments: JsonObject


class ToolStatusJson(TypedDict):
    type: Literal["tool-status"]
    callId: str
    text: str


class ToolFinishedJson(TypedDict):
    type: Literal["tool-finished"]
    callId: str
    name: str
    text: str
    isError: bool
    result: NotRequired[JsonObject]


class RequestedJson(TypedDict):
    type: Literal["elicitation-requested"]
    elicitation: ElicitationJson


class RunPausedJson(TypedDict):
    type: Literal["run-paused"]
    elicitationIds: list[str]


class RunFinishedJson(TypedDict):
    type: Literal["run-finished"]
    reason: str


StoredEvent = (
    RunStartedJson
    | StepStartedJson
    | TextJson
    | ModelSaidJson
    | ModelStatusJson
    | ToolStartedJson
    | ToolStatusJson
    | ToolFinishedJson
    | RequestedJson
    | ResolvedEvent
    | RunPausedJson
    | RunFinishedJson
)
"""An event as the log keeps it: `elicitation-resolved` is kept as the public event it is on every stream."""


def to_json(event: StreamEvent) -> StoredEvent:
    """The stored form of an event (the event log keeps JSON)."""
    if isinstance(event, RunStarted):
        return {"type": "run-started", "messageId": event.message_id}
    if isinstance(event, StepStarted):
        return {"type": "step-started", "turn": event.turn} if event.turn else {"type": "step-started"}
    if isinstance(event, TextDelta):
        return {"type": "text", "text": event.text}
    if isinstance(event, ModelSaid):
        said: ModelSaidJson = {"type": "model-said", "turn": event.turn, "text": event.text}
        if event.reasoning:
            said["reasoning"] = event.reasoning
        if event.usage is not None:
            said["usage"] = [event.usage.input_tokens, event.usage.output_tokens]
        return said
    if isinstance(event, ModelStatus):
        return {"type": "model-status", "text": event.text}
    if isinstance(event, ReasoningDelta | ToolInputDelta | TokenUsage):
        raise TypeError(f"{type(event).__name__} passes to readers and is never logged")
    if isinstance(event, ToolCall):
        return {"type": "tool-started", "callId": event.call_id, "name": event.name, "arguments": event.arguments}
    if isinstance(event, ToolStatus):
        return {"type": "tool-status", "callId": event.call_id, "text": event.text}
    if isinstance(event, ToolCallFinished):
        finished: ToolFinishedJson = {
            "type": "tool-finished",
            "callId": event.call_id,
            "name": event.name,
            "text": event.text,
            "isError": event.is_error,
        }
        if event.result is not None:
            finished["result"] = event.result
        return finished
    if isinstance(event, ElicitationRequested):
        return {"type": "elicitation-requested", "elicitation": event.elicitation.to_json()}
    if isinstance(event, ElicitationResolved):
        return resolved_event(event.elicitation_id, event.outcome, event.answered_by)
    if isinstance(event, RunPaused):
        return {"type": "run-paused", "elicitationIds": list(event.elicitation_ids)}
    return {"type": "run-finished", "reason": event.reason}


class Logged(dict[str, Any]):
    """A run's event as it goes on the log (`{"run": RUN, **to_json(event)}`), carrying the event it was made from.
    Stores keep what they were handed in memory for the readers on their own hub, so those read the event back as
    written (`event_of`) instead of decoding the dict again; one read back from a store is a plain dict."""

    __slots__ = ("event",)

    def __init__(self, run_id: str, event: StreamEvent) -> None:
        super().__init__(run=run_id)
        self.update(to_json(event))
        self.event = event


def event_of(data: JsonObject) -> StreamEvent | None:
    """The event a logged dict stands for: the one written, when it was written on this hub."""
    if type(data) is Logged:
        return data.event
    return from_json(data)


def from_json(data: JsonObject) -> StreamEvent | None:
    """The event a stored form stands for (`StoredEvent`, read back as any version wrote it); None for a type this
    version does not know (it is passed over)."""
    kind = data.get("type")
    if kind == "run-started":
        return RunStarted(data["messageId"])
    if kind == "step-started":
        return StepStarted(data.get("turn", ""))
    if kind == "model-said":
        usage = data.get("usage")
        return ModelSaid(data["turn"], data["text"], data.get("reasoning", ""), TokenUsage(*usage) if usage else None)
    if kind == "model-status":
        return ModelStatus(data["text"])
    if kind == "text":
        return TextDelta(data["text"])
    if kind == "tool-started":
        return ToolCall(data["callId"], data["name"], data["arguments"])
    if kind == "tool-status":
        return ToolStatus(data["callId"], data["text"])
    if kind == "tool-finished":
        return ToolCallFinished(data["callId"], data["name"], data["text"], data["isError"], data.get("result"))
    if kind == "elicitation-requested":
        return ElicitationRequested(Elicitation.from_json(data["elicitation"]))
    if kind == "elicitation-resolved":
        return ElicitationResolved(data["elicitationId"], data["outcome"], data.get("answeredBy"))
    if kind == "run-paused":
        return RunPaused(tuple(data["elicitationIds"]))
    if kind == "run-finished":
        return RunFinished(data.get("reason", "stop"))
    return None
