"""A run's stream events as AG-UI 1.0 events (the `ag-ui-protocol` package's models), and a conversation's messages
as a `MESSAGES_SNAPSHOT`."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    DeveloperMessage,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
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
from elicithub.core.events import RunFinished, StepStarted, StreamEvent, TextDelta, ToolCallFinished
from elicithub.core.runs import Message, ToolCall

PROTOCOL_VERSION = "1.0"


def result_id(tool_call_id: str) -> str:
    """The id of the tool message a call's result makes: the same on the stream and in a snapshot."""
    return f"{tool_call_id}-result"


class AguiWriter:
    """One AG-UI run (`thread_id`, the client's `run_id`) written from the hub run's events. `call` is the tool call
    in progress: a continuation starts inside the call its interrupts paused (its start is not sent again)."""

    def __init__(self, thread_id: str, run_id: str, call: str | None = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.call = call
        self._text_id: str | None = None

    def start(self) -> list[BaseEvent]:
        return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION)]

    def _end_text(self) -> list[BaseEvent]:
        if self._text_id is None:
            return []
        ended = TextMessageEndEvent(message_id=self._text_id)
        self._text_id = None
        return [ended]

    def write(self, event: StreamEvent) -> list[BaseEvent]:
        if isinstance(event, TextDelta):
            if not event.text:
                return []
            out: list[BaseEvent] = []
            if self._text_id is None:
                self._text_id = new_id("msg")
                out.append(TextMessageStartEvent(message_id=self._text_id, role="assistant"))
            return [*out, TextMessageContentEvent(message_id=self._text_id, delta=event.text)]
        if isinstance(event, StepStarted):
            return self._end_text()
        if isinstance(event, ToolCall):
            self.call = event.call_id
            return [
                *self._end_text(),
                ToolCallStartEvent(tool_call_id=event.call_id, tool_call_name=event.name),
                ToolCallArgsEvent(tool_call_id=event.call_id, delta=json.dumps(event.arguments)),
                ToolCallEndEvent(tool_call_id=event.call_id),
            ]
        if isinstance(event, ToolCallFinished):
            self.call = None
            result = ToolCallResultEvent(
                message_id=result_id(event.call_id), tool_call_id=event.call_id, content=event.text, role="tool"
            )
            return [*self._end_text(), result]
        if isinstance(event, RunFinished):
            return self.finished(event.reason)
        # Questions show as interrupts when the run pauses; a tool's status and a question's end show nothing.
        return []

    def finished(self, reason: str) -> list[BaseEvent]:
        """The run's end: a failed run is a RUN_ERROR, one a newer message stopped is cancelled."""
        if reason == "error":
            return [*self._end_text(), RunErrorEvent(message="The run failed.", code="run_failed")]
        outcome = RunFinishedCancelledOutcome() if reason == "superseded" else RunFinishedSuccessOutcome()
        return [*self._end_text(), RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)]

    def interrupted(self, transcript: Sequence[Message], interrupts: list[Interrupt]) -> list[BaseEvent]:
        """The run ends on its open questions: the thread's messages, then one interrupt per question."""
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        return [
            *self._end_text(),
            MessagesSnapshotEvent(messages=snapshot(self.thread_id, transcript)),
            RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome),
        ]

    def error(self, code: str, message: str) -> list[BaseEvent]:
        return [*self._end_text(), RunErrorEvent(message=message, code=code)]


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
