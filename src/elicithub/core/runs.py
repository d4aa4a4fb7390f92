"""Runs and conversations as plain records, and the rules for how a run's status may change (no I/O)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NotRequired, Required, TypedDict
from urllib.parse import quote

from elicithub.core.jsoncodec import JsonObject
from elicithub.errors import HubError


class FunctionCall(TypedDict):
    name: str
    arguments: str
    """The arguments as a JSON text, as OpenAI writes them."""


class MessageToolCall(TypedDict):
    """One tool call of an assistant message, in OpenAI's shape."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class Message(TypedDict, total=False):
    """A chat message in OpenAI's shape; tool messages also carry a private `is_error` flag.

    A client's history may carry more keys (`name`, ...) and content of its own shape (a list of parts, the
    JSON of an answer): they are kept as they came.
    """

    role: Required[str]
    content: str | list[JsonObject] | JsonObject | None
    tool_calls: list[MessageToolCall]
    tool_call_id: str
    is_error: bool
    reasoning: str
    """An assistant message's thinking, as the model streamed it."""
    reasoning_signature: str
    """The provider's seal over that thinking, sent back unchanged (Anthropic)."""


class ToolCallJson(TypedDict):
    """A `ToolCall` as a run record keeps it."""

    id: str
    name: str
    arguments: JsonObject
    error: NotRequired[str]


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for: made by the run loop, shown on the stream, kept on the run record."""

    call_id: str
    name: str
    arguments: JsonObject
    error: str | None = None
    """Why the arguments the model wrote could not be used: the call is never made, and this is its error."""

    def to_json(self) -> ToolCallJson:
        data: ToolCallJson = {"id": self.call_id, "name": self.name, "arguments": self.arguments}
        if self.error is not None:
            data["error"] = self.error
        return data

    @classmethod
    def from_json(cls, data: ToolCallJson) -> ToolCall:
        return cls(data["id"], data["name"], data["arguments"], data.get("error"))


class ClientTool(TypedDict):
    """A tool the run's client offers the model and makes itself (AG-UI's front-end tools): the hub never calls it.
    A call of one ends the run; the client's result, sent as the conversation's next message, starts the next."""

    name: str
    description: str
    parameters: JsonObject
    """The JSON schema of its arguments."""


def waiting_calls(messages: Sequence[Message]) -> list[str]:
    """The ids of the calls that wait for their result: those of the last assistant message without one, when
    nothing but results follows it (a run that ended on calls its client makes)."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message["role"] == "tool":
            answered.add(str(message.get("tool_call_id", "")))
        elif message["role"] == "assistant":
            return [c["id"] for c in message.get("tool_calls", []) if c["id"] not in answered]
        else:
            break
    return []


RunStatus = Literal["running", "paused", "finished"]

CHILD_RUN = "childRunId"
"""The key of a Pause's state that names the delegated run the paused call waits on."""


class RerunState(TypedDict):
    """A pause's state when the call is made again from its start on resume (the run loop answers the questions it
    asked before first): a question whose open request cannot outlive the hub, a sign-in, an approval."""

    kind: Literal["rerun"]


@dataclass(frozen=True)
class Pause:
    """Where a tool call stopped for input, in the words of the trigger that asked.

    `trigger` names who asked (`mcp`, `credentials`, `a2a`, ...); `state` is whatever that trigger needs to
    resume (`RerunState`; MCP: triggers/mcp/pauses.py), read-only once recorded;
    `elicitation_ids` maps the trigger's key for each question (an `inputRequests` key, or a position) to the
    hub's elicitation id.
    """

    trigger: str
    elicitation_ids: dict[str, str]
    state: Mapping[str, Any] = field(default_factory=dict)

    @property
    def child_run_id(self) -> str | None:
        """The delegated run the paused call waits on (a delegation notes it), whose questions are its own."""
        child = self.state.get(CHILD_RUN)
        return child if isinstance(child, str) else None


@dataclass(frozen=True)
class RunRecord:
    """One run of an agent over a conversation: enough to continue it on any instance, after any restart."""

    run_id: str
    conversation_id: str
    user_id: str | None
    supports_elicitation: bool
    messages: list[Message]  # up to the assistant message whose tool calls are being made
    parent_run_id: str | None = None
    agent: str = "assistant"
    tool_calls: list[ToolCall] = field(default_factory=list)  # those of that message
    call_index: int = 0  # the call in progress; earlier ones have their results in `messages`
    pause: Pause | None = None
    status: RunStatus = "running"
    owner: str = ""  # the instance that runs it
    surface: str = "chat"  # where its person is (chat, mcp, a2a, slack)
    modes: list[str] = field(default_factory=lambda: ["form", "url"])  # the questions their client can show
    updated_at: float = 0.0
    client_tools: list[ClientTool] = field(default_factory=list)
    """The tools its client offers beside the agent's own (a call of one ends the run)."""
    instructions: str = ""
    """What its client adds to the agent's instructions for this run (AG-UI's `context`)."""
    direct: bool = False
    """A direct call through the gateway (`/mcp`'s tools/call of SERVER.TOOL): the run makes its `tool_calls`, and no
    model turn follows."""
    limited_as: list[str] = field(default_factory=list)
    """The limits' sets that hold a place for it (`runtime/limits.py`): whichever hub finishes it lets them go."""
    history: int = 0
    """How many of the first `messages` are its conversation's first messages, which the store keeps once with the
    conversation: a save writes only the run's own messages after them, so its cost does not grow with the
    conversation. A delegated run's messages are all its own (0)."""

    def to_json(self) -> JsonObject:
        """A JSON-ready view without the conversation's `history` messages, sharing this record's lists and dicts
        (serialize it, don't change it): no deep copy, since every pause and step writes one."""
        data = dict(vars(self))
        data["messages"] = self.messages[self.history :]
        data["tool_calls"] = [call.to_json() for call in self.tool_calls]
        data["pause"] = None if self.pause is None else dict(vars(self.pause))
        return data

    @classmethod
    def from_json(cls, data: JsonObject, history: Sequence[Message] = (), *, messages: bool = True) -> RunRecord:
        """From `to_json`'s form and the conversation's first messages it names (`history`), or without any messages
        (`messages=False`). Records of earlier versions hold all their messages and no `history`."""
        pause = data.get("pause")
        calls = [ToolCall.from_json(call) for call in data.get("tool_calls", [])]
        own = data["messages"] if messages else []
        fields = {**data, "messages": [*history, *own], "history": len(history)}
        return cls(**{**fields, "tool_calls": calls, "pause": Pause(**pause) if pause else None})

    def with_(self, **changes: Any) -> RunRecord:
        return replace(self, updated_at=time.time(), **changes)


@dataclass(frozen=True)
class ConversationRecord:
    """A conversation as the store keeps it: whose it is, what was said, and the one run it may have going.

    `key` is unique across users (Alice's and Bob's `chat-1` are two conversations); `version` grows with
    every write, so writers compare-and-set on it. The store keeps the messages apart, in a list that only grows:
    a write adds `messages[stored:]`, the messages said since the record was read.
    """

    key: str
    id: str
    user_id: str | None
    messages: list[Message] = field(default_factory=list)  # empty when read without them
    active_run_id: str | None = None
    active_run_after: int = 0  # the event log's position just before the active run's first event
    version: int = 0
    updated_at: float = 0.0
    stored: int = field(default=0, compare=False)
    """How many messages the store held when this record was read: the next write adds only those after them."""

    def to_json(self) -> JsonObject:
        """A JSON-ready view without the messages (the store keeps them apart)."""
        data = dict(vars(self))
        del data["messages"], data["stored"]
        return data

    @classmethod
    def from_json(cls, data: JsonObject, messages: list[Message] | None = None, stored: int = 0) -> ConversationRecord:
        """From `to_json`'s form and the `stored` messages kept apart (`messages`: those read, if any), or from the
        form of earlier versions, whose messages are inline and not yet in the list: the next write adds them all."""
        if "messages" in data:
            return cls(**data)
        return cls(**data, messages=messages or [], stored=stored)


# Run transitions: a run is running, waits (paused) for answers, runs again, and finishes once.

RunChange = Literal["pause", "continue", "finish"]

_NEXT: dict[tuple[RunStatus, RunChange], RunStatus] = {
    ("running", "pause"): "paused",
    ("paused", "pause"): "paused",  # a later round of the same call
    ("paused", "continue"): "running",
    ("running", "continue"): "running",
    ("running", "finish"): "finished",
    ("paused", "finish"): "finished",  # cancelled or taken over while waiting
}


class RunTransitionError(HubError):
    """A change that the run's status does not allow (a finished run never runs again)."""


def next_status(current: RunStatus, change: RunChange) -> RunStatus:
    status = _NEXT.get((current, change))
    if status is None:
        raise RunTransitionError(f"a {current} run cannot {change}")
    return status


def conversation_key(user_id: str | None, conversation_id: str) -> str:
    """The store key of a conversation: ids are scoped to their user; anonymous ones share the `~` scope."""
    return f"~/{conversation_id}" if user_id is None else f"u:{quote(user_id, safe='')}/{conversation_id}"
