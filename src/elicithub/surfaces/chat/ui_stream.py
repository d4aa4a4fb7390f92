"""The AI SDK UI message stream (protocol v1): text, reasoning, tool and data parts, then finish and [DONE].

A model turn streams: its thinking as a reasoning part and its text as a text part, each opened at its first piece
and closed when something else follows (at the latest, when its step ends); a call's arguments as the model writes
them (`tool-input-start`, `tool-input-delta`), then the whole input (`tool-input-available`) once the call is made.

With native approvals (AI SDK 6), a question approving the person's own tool call is a `tool-approval-request` for
that call, and the stream ends when the run pauses on such questions alone: the AI SDK client answers with an
`approval-responded` tool part in its next request (surfaces/chat/ui_approvals.py), whose stream goes on with the same
assistant message."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from elicithub.core.elicitation import new_id
from elicithub.core.events import (
    ElicitationRequested,
    ElicitationResolved,
    ModelStatus,
    ReasoningDelta,
    RunFinished,
    RunPaused,
    StepStarted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolInputDelta,
    ToolStatus,
    framed,
)
from elicithub.core.runs import ToolCall
from elicithub.surfaces.chat.ui_parts import (
    Bound,
    ToolInputErrorPart,
    ToolInputPart,
    approval_request,
    encode,
    question,
    resolved,
    tool_output,
    tool_status,
)

HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
DONE = "[DONE]"
Kind = Literal["text", "reasoning"]
_BOUNDS: dict[Kind, tuple[Bound, Bound]] = {
    "text": ("text-start", "text-end"),
    "reasoning": ("reasoning-start", "reasoning-end"),
}


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
        self._open: tuple[Kind, str] | None = None
        """The text or reasoning part open now (its kind and id): the turn's next piece of that kind goes on in it."""
        self._parts = 0
        self._inputs: dict[str, tuple[str, str]] = {}
        """The calls whose input has streamed here and that are not made yet: (name, input so far) by call id."""
        self._in_step = continues is not None
        self._call: str | None = None
        """The tool call under way, whose questions these are."""
        self._native: set[str] = set()
        """The questions sent as `tool-approval-request`."""

    def start(self) -> list[str]:
        return [encode({"type": "start", "messageId": self.message_id})]

    def _close_part(self) -> list[str]:
        """Close the text or reasoning part open now: something else follows."""
        if self._open is None:
            return []
        kind, part_id = self._open
        self._open = None
        return [encode({"type": _BOUNDS[kind][1], "id": part_id})]

    def _piece(self, kind: Kind, delta: str) -> list[str]:
        """A piece of the turn's text or thinking: in the part of its kind open now, or in a new one."""
        out = self._step()
        if self._open is None or self._open[0] != kind:
            out += self._close_part()
            self._parts += 1
            self._open = kind, f"{self.message_id}_{kind[0]}{self._parts}"
            out.append(encode({"type": _BOUNDS[kind][0], "id": self._open[1]}))
        delta_type: Literal["text-delta", "reasoning-delta"] = "text-delta" if kind == "text" else "reasoning-delta"
        out.append(encode({"type": delta_type, "id": self._open[1], "delta": delta}))
        return out

    def _input(self, event: ToolInputDelta) -> list[str]:
        """Some of a call's arguments as the model writes them. A reader that missed the call's first piece (it
        came later) gets none: the call's `tool-input-available` brings the input whole."""
        started = self._inputs.get(event.call_id)
        if started is None and not event.first:
            return []
        out = [*self._step(), *self._close_part()]
        if started is None:
            started = event.name, ""
            out.append(
                encode(
                    {"type": "tool-input-start", "toolCallId": event.call_id, "toolName": event.name, "dynamic": True}
                )
            )
        self._inputs[event.call_id] = started[0], started[1] + event.text
        if event.text:
            out.append(encode({"type": "tool-input-delta", "toolCallId": event.call_id, "inputTextDelta": event.text}))
        return out

    def _abandoned(self) -> list[str]:
        """The calls whose input streamed but that will not be made: their turn or run ended first."""
        out = []
        for call_id, (name, text) in self._inputs.items():
            part: ToolInputErrorPart = {
                "type": "tool-input-error",
                "toolCallId": call_id,
                "toolName": name,
                "input": text,
                "errorText": "The call was not made: its model turn or run ended first.",
                "dynamic": True,
            }
            out.append(encode(part))
        self._inputs.clear()
        return out

    def _step(self) -> list[str]:
        """Open a step before content that comes outside one (a stream that continues a run starts mid-step)."""
        if self._in_step:
            return []
        self._in_step = True
        return [encode({"type": "start-step"})]

    def _end_step(self, over: bool = False) -> list[str]:
        """Close the step; `over`: its turn's calls that were not made never will be."""
        if not self._in_step:
            return []
        self._in_step = False
        return [*self._close_part(), *(self._abandoned() if over else []), encode({"type": "finish-step"})]

    def write(self, event: StreamEvent) -> list[str]:
        if isinstance(event, StepStarted):
            return [*self._end_step(over=True), *self._step()]
        if isinstance(event, TextDelta):
            return self._piece("text", event.text)
        if isinstance(event, ReasoningDelta):
            return self._piece("reasoning", event.text)
        if isinstance(event, ToolInputDelta):
            return self._input(event)
        if isinstance(event, ModelStatus):
            return [encode({"type": "data-model-status", "data": {"message": event.text}, "transient": True})]
        if isinstance(event, ToolCall) and self._input_held and event.call_id == self._continued:
            self._input_held = False  # once: a later call of the same id is a new one
            self._call = event.call_id
            return []
        if isinstance(event, ToolCall):
            self._inputs.pop(event.call_id, None)  # its input streamed as tool-input-delta, or comes whole now
            # Tools come from MCP servers the client does not know of: dynamic tools, in AI SDK terms.
            part: ToolInputPart = {
                "type": "tool-input-available",
                "toolCallId": event.call_id,
                "toolName": event.name,
                "input": event.arguments,
                "dynamic": True,
            }
            self._call = event.call_id
            return [*self._step(), *self._close_part(), encode(part)]
        if isinstance(event, ToolStatus):
            return [*self._step(), *self._close_part(), framed(event, "ui", lambda: tool_status(event))]
        if isinstance(event, ToolCallFinished):
            self._call = None
            continued, self._continued = event.call_id == self._continued, None
            if continued and self.denied and event.is_error:
                return [*self._step(), tool_output(event, denied=True)]
            return [*self._step(), framed(event, "ui", lambda: tool_output(event))]
        if isinstance(event, ElicitationRequested):
            if self._native_approval(event):
                assert self._call is not None
                self._native.add(event.elicitation.id)
                # Not `framed`: the frame names the call this stream showed, which another reader may not have seen.
                return [*self._step(), *self._close_part(), approval_request(event, self._call)]
            return [*self._step(), *self._close_part(), framed(event, "ui", lambda: question(event))]
        if isinstance(event, ElicitationResolved):
            return [framed(event, "ui", lambda: resolved(event))]
        if isinstance(event, RunPaused) and self._waits_for_client(event):
            self.ended = True
            return self.end()
        if isinstance(event, RunFinished):
            return [*self._end_step(over=True), *self.end()]
        return []  # RunStarted, RunPaused, TokenUsage: nothing to show

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
        """The stream ends here: at the run's end, at a pause only the client's next request goes on from, or where
        the run's events stopped coming (its calls may still be made: their inputs are left as they are)."""
        return [*self._end_step(), *self._close_part(), encode({"type": "finish"}), DONE]
