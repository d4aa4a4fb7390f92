"""A run's stream events as AG-UI 1.0 events (the `ag-ui-protocol` package's models), and a conversation's messages
as a `MESSAGES_SNAPSHOT`."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    DeveloperMessage,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import Message as AguiMessage
from ag_ui.core import ToolCall as AguiToolCall

from elicithub.core.elicitation import new_id
from elicithub.core.events import (
    ModelStatus,
    ReasoningDelta,
    RunFinished,
    StepStarted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolInputDelta,
)
from elicithub.core.runs import Message, ToolCall
from elicithub.runtime.loop import CLIENT_TOOL

PROTOCOL_VERSION = "1.0"


def result_id(tool_call_id: str) -> str:
    """The id of the tool message a call's result makes: the same on the stream and in a snapshot."""
    return f"{tool_call_id}-result"


MODEL_STATUS = "elicithub:model_status"
"""The CUSTOM event that says what the model's request does now (`value`: `{"message": ...}`), e.g. a retry."""


class AguiWriter:
    """One AG-UI run (`thread_id`, the client's `run_id`) written from the hub run's events. `call` is the tool call
    in progress: a continuation starts inside the call its interrupts paused (its start is not sent again).

    A model turn's text is one text message, and its calls are that message's tool calls (`parentMessageId`); its
    thinking is a reasoning message before them. A call starts as the model starts writing it and its arguments
    stream; it ends when the hub has them all (the hub's `ToolCall`). A call this run did not see start (a reader
    that came mid-turn, a continuation) starts, has its arguments and ends at once. Whatever is open is ended
    before the run ends."""

    def __init__(self, thread_id: str, run_id: str, call: str | None = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.call = call
        self._message: str | None = None
        """The assistant message of the model turn going on: its text's id, and its calls' parent."""
        self._message_said = False
        """The turn's message has had text or a call: more text after that is a message of its own."""
        self._text_id: str | None = None
        self._reasoning: tuple[str, str] | None = None
        """The reasoning going on: its span's id and its message's."""
        self._streaming: dict[str, None] = {}
        """The calls started whose arguments still stream, in the order they started."""
        self._shown: dict[str, None] = {}
        """The calls this run showed, without a result yet."""

    def start(self) -> list[BaseEvent]:
        return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION)]

    def write(self, event: StreamEvent) -> list[BaseEvent]:
        if isinstance(event, TextDelta):
            return self._text(event.text) if event.text else []
        if isinstance(event, ReasoningDelta):
            return self._think(event.text) if event.text else []
        if isinstance(event, StepStarted):
            ended = self._end_words()
            self._message, self._message_said = None, False
            return ended
        if isinstance(event, ToolInputDelta):
            return self._input(event)
        if isinstance(event, ToolCall):
            self.call = event.call_id
            self._shown[event.call_id] = None
            if event.call_id in self._streaming:  # its arguments streamed: they are all there now
                del self._streaming[event.call_id]
                return [*self._end_words(), ToolCallEndEvent(tool_call_id=event.call_id)]
            ended, parent = self._end_words(), self._turn_message()
            self._message_said = True
            return [
                *ended,
                ToolCallStartEvent(tool_call_id=event.call_id, tool_call_name=event.name, parent_message_id=parent),
                ToolCallArgsEvent(tool_call_id=event.call_id, delta=json.dumps(event.arguments)),
                ToolCallEndEvent(tool_call_id=event.call_id),
            ]
        if isinstance(event, ToolCallFinished):
            self.call = None
            self._shown.pop(event.call_id, None)
            result = ToolCallResultEvent(
                message_id=result_id(event.call_id), tool_call_id=event.call_id, content=event.text, role="tool"
            )
            return [*self._end_words(), result]
        if isinstance(event, ModelStatus):
            return [CustomEvent(name=MODEL_STATUS, value={"message": event.text})]
        if isinstance(event, RunFinished):
            return self.finished(event.reason)
        # Questions show as interrupts when the run pauses; a tool's status, a question's end and the tokens a
        # request used show nothing.
        return []

    def _turn_message(self) -> str:
        if self._message is None:
            self._message = new_id("msg")
        return self._message

    def _text(self, text: str) -> list[BaseEvent]:
        out = self._end_reasoning()
        if self._text_id is None:
            self._text_id = new_id("msg") if self._message_said else self._turn_message()
            self._message_said = True
            out.append(TextMessageStartEvent(message_id=self._text_id, role="assistant"))
        return [*out, TextMessageContentEvent(message_id=self._text_id, delta=text)]

    def _think(self, text: str) -> list[BaseEvent]:
        out = self._end_text()
        if self._reasoning is None:
            self._reasoning = (new_id("rsn"), new_id("msg"))
            out.append(ReasoningStartEvent(message_id=self._reasoning[0]))
            out.append(ReasoningMessageStartEvent(message_id=self._reasoning[1], role="reasoning"))
        return [*out, ReasoningMessageContentEvent(message_id=self._reasoning[1], delta=text)]

    def _input(self, event: ToolInputDelta) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if event.first and event.call_id not in self._streaming and event.call_id not in self._shown:
            out = self._end_words()
            parent = self._turn_message()
            self._message_said = True
            self._streaming[event.call_id] = None
            start = ToolCallStartEvent(tool_call_id=event.call_id, tool_call_name=event.name, parent_message_id=parent)
            out.append(start)
        if event.call_id in self._streaming and event.text:
            out.append(ToolCallArgsEvent(tool_call_id=event.call_id, delta=event.text))
        return out

    def _end_text(self) -> list[BaseEvent]:
        if self._text_id is None:
            return []
        ended = TextMessageEndEvent(message_id=self._text_id)
        self._text_id = None
        return [ended]

    def _end_reasoning(self) -> list[BaseEvent]:
        if self._reasoning is None:
            return []
        span, message = self._reasoning
        self._reasoning = None
        return [ReasoningMessageEndEvent(message_id=message), ReasoningEndEvent(message_id=span)]

    def _end_words(self) -> list[BaseEvent]:
        return [*self._end_reasoning(), *self._end_text()]

    def _end_all(self) -> list[BaseEvent]:
        """Before the run ends: what is open ends (a call whose arguments streamed in a turn a stop cut short)."""
        calls, self._streaming = list(self._streaming), {}
        return [*self._end_words(), *(ToolCallEndEvent(tool_call_id=c) for c in calls)]

    def finished(self, reason: str) -> list[BaseEvent]:
        """The run's end: a failed run is a RUN_ERROR, one a newer message stopped is cancelled, one that hands
        calls over to the client names them (`pendingToolCallIds`)."""
        ended = self._end_all()
        if reason == "error":
            return [*ended, RunErrorEvent(message="The run failed.", code="run_failed")]
        outcome: RunFinishedCancelledOutcome | RunFinishedSuccessOutcome
        if reason == "superseded":
            outcome = RunFinishedCancelledOutcome()
        elif reason == CLIENT_TOOL and self._shown:
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=list(self._shown))
        else:
            outcome = RunFinishedSuccessOutcome()
        return [*ended, RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)]

    def interrupted(self, transcript: Sequence[Message], interrupts: list[Interrupt]) -> list[BaseEvent]:
        """The run ends on its open questions: the thread's messages, then one interrupt per question."""
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        return [
            *self._end_all(),
            MessagesSnapshotEvent(messages=snapshot(self.thread_id, transcript)),
            RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome),
        ]

    def error(self, code: str, message: str) -> list[BaseEvent]:
        return [*self._end_all(), RunErrorEvent(message=message, code=code)]


def snapshot(thread_id: str, messages: Sequence[Message]) -> list[AguiMessage]:
    """A conversation's messages (OpenAI's shape) as AG-UI messages; each named by its place in the thread, a tool
    result as on the stream."""
    shown: list[AguiMessage] = []
    for index, message in enumerate(messages):
        role, text = message["role"], words(message.get("content"))
        message_id = f"{thread_id}-{index}"
        if role == "user":
            shown.append(UserMessage(id=message_id, content=text))
        elif role == "assistant":
            made = message.get("tool_calls", [])
            calls = [AguiToolCall(id=c["id"], function=FunctionCall(**c["function"])) for c in made]
            shown.append(AssistantMessage(id=message_id, content=text or None, tool_calls=calls or None))
        elif role == "tool":
            call_id = message.get("tool_call_id", "")
            error = text if message.get("is_error") else None
            shown.append(ToolMessage(id=result_id(call_id), tool_call_id=call_id, content=text, error=error))
        elif role == "system":
            shown.append(SystemMessage(id=message_id, content=text))
        elif role == "developer":
            shown.append(DeveloperMessage(id=message_id, content=text))
    return shown


def history(messages: Sequence[AguiMessage]) -> list[Message]:
    """What a client's messages tell of a thread the hub does not know yet (a front-end that kept it): their words,
    in OpenAI's shape. Tool calls and results are left out: they were made elsewhere, and a model given a call
    without its result (or the reverse) refuses the history."""
    told: list[Message] = []
    for message in messages:
        text = words(message.content) if isinstance(message.content, str | list) else ""
        if message.role in ("user", "assistant", "system", "developer") and text:
            told.append({"role": message.role, "content": text})
    return told


def words(content: object) -> str:
    """A message's text: its string, or its text parts joined (a list of parts, as models or as JSON)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, dict) else vars(p) for p in content]
        return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    return "" if content is None else json.dumps(content)
