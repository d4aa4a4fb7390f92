"""Anthropic Messages streaming: named events, content blocks (text, thinking with its signature, tool_use)."""

from __future__ import annotations

from typing import Any

from tests.models.script import Content, Fail, Recorded, Reply, Text, Thinking, ToolCall
from tests.models.sse import sse

# Anthropic's error types by status (https://docs.anthropic.com/en/api/errors); any other is an `api_error`.
ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


class AnthropicWire:
    def __init__(self, reply: Reply, request: Recorded) -> None:
        self.reply = reply
        self.request = request
        self.block = -1
        self.open: str | None = None  # the kind of the open text or thinking block; pieces of one kind share it
        self.signature = ""
        self.stop_reason = "end_turn"

    def opening(self) -> list[str]:
        message = {
            "id": f"msg_standin_{self.request.index}",
            "type": "message",
            "role": "assistant",
            "model": self.request.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.reply.input_tokens, "output_tokens": 1},
        }
        return [self._event("message_start", message=message)]

    def content(self, step: Content) -> list[str]:
        if isinstance(step, Text):
            events = self._start("text", {"type": "text", "text": ""})
            return [*events, self._delta({"type": "text_delta", "text": step.text})]
        if isinstance(step, Thinking):
            events = self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            self.signature = step.signature
            return [*events, self._delta({"type": "thinking_delta", "thinking": step.text})]
        return self._tool_use(step)

    def _tool_use(self, call: ToolCall) -> list[str]:
        call_id = call.id or f"toolu_{self.request.index}_{self.block + 1}"
        events = self._start("tool_use", {"type": "tool_use", "id": call_id, "name": call.name, "input": {}})
        for fragment in call.fragments():
            events.append(self._delta({"type": "input_json_delta", "partial_json": fragment}))
        self.stop_reason = "tool_use"
        return [*events, *self._stop()]  # a block per call: the next call starts its own

    def closing(self) -> list[str]:
        usage = {"output_tokens": self.reply.output_tokens}  # cumulative: the reply's total
        delta = {"stop_reason": self.stop_reason, "stop_sequence": None}
        return [*self._stop(), self._event("message_delta", delta=delta, usage=usage), self._event("message_stop")]

    def failure(self, fail: Fail) -> list[str]:
        return [sse(self.error_body(fail), event="error")]

    @staticmethod
    def error_body(fail: Fail) -> dict[str, Any]:
        return {"type": "error", "error": {"type": ERRORS.get(fail.status, "api_error"), "message": fail.message}}

    def _start(self, kind: str, block: dict[str, Any]) -> list[str]:
        if self.open == kind:
            return []
        events = self._stop()
        self.block += 1
        self.open = kind
        return [*events, self._event("content_block_start", index=self.block, content_block=block)]

    def _stop(self) -> list[str]:
        if self.open is None:
            return []
        events = []
        if self.open == "thinking":
            events.append(self._delta({"type": "signature_delta", "signature": self.signature}))
        self.open = None
        return [*events, self._event("content_block_stop", index=self.block)]

    def _delta(self, delta: dict[str, Any]) -> str:
        return self._event("content_block_delta", index=self.block, delta=delta)

    @staticmethod
    def _event(name: str, **fields: Any) -> str:
        return sse({"type": name, **fields}, event=name)
