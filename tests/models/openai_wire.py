"""OpenAI chat completions streaming: `chat.completion.chunk`s, a usage chunk when asked, then `[DONE]`."""

from __future__ import annotations

import time
from typing import Any

from tests.models.script import Content, Fail, Recorded, Reply, Text, Thinking, ToolCall
from tests.models.sse import sse

# (type, code) of OpenAI's error JSON by status; any other status is a plain invalid request.
ERRORS = {
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


class OpenAIWire:
    def __init__(self, reply: Reply, request: Recorded) -> None:
        self.reply = reply
        self.id = f"chatcmpl-standin-{request.index}"
        self.model = request.model
        self.index = request.index
        options = request.body.get("stream_options") or {}
        self.usage_asked = bool(options.get("include_usage"))
        self.created = int(time.time())
        self.calls = 0
        self.role_sent = False

    def opening(self) -> list[str]:
        return []

    def content(self, step: Content) -> list[str]:
        if isinstance(step, Text):
            return [self._chunk({"content": step.text})]
        if isinstance(step, Thinking):
            # Not OpenAI's own (it keeps reasoning hidden): what DeepSeek, vLLM and others stream, which
            # pydantic-ai reads as thinking.
            return [self._chunk({"reasoning_content": step.text})]
        return self._tool_call(step)

    def _tool_call(self, call: ToolCall) -> list[str]:
        position = self.calls
        self.calls += 1
        call_id = call.id or f"call_{self.index}_{position}"
        start = {"index": position, "id": call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        events = [self._chunk({"tool_calls": [start]})]
        for fragment in call.fragments():
            events.append(self._chunk({"tool_calls": [{"index": position, "function": {"arguments": fragment}}]}))
        return events

    def closing(self) -> list[str]:
        events = [self._chunk({}, finish="tool_calls" if self.calls else "stop")]
        if self.usage_asked:
            usage = {
                "prompt_tokens": self.reply.input_tokens,
                "completion_tokens": self.reply.output_tokens,
                "total_tokens": self.reply.input_tokens + self.reply.output_tokens,
            }
            events.append(sse({**self._envelope(), "choices": [], "usage": usage}))
        return [*events, "data: [DONE]\n\n"]

    def failure(self, fail: Fail) -> list[str]:
        return [sse(self.error_body(fail))]

    @staticmethod
    def error_body(fail: Fail) -> dict[str, Any]:
        otherwise = ("server_error", None) if fail.status >= 500 else ("invalid_request_error", None)
        kind, code = ERRORS.get(fail.status, otherwise)
        return {"error": {"message": fail.message, "type": kind, "param": None, "code": code}}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        if not self.role_sent:
            delta = {"role": "assistant", **delta}
            self.role_sent = True
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse({**self._envelope(), "choices": [choice]})

    def _envelope(self) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model}
