"""Gemini `streamGenerateContent?alt=sse`: one `GenerateContentResponse` per event, tool calls whole."""

from __future__ import annotations

import json
from typing import Any

from tests.models.script import Content, Fail, Recorded, Reply, Text, Thinking
from tests.models.sse import sse

# google.rpc status names by HTTP status (https://ai.google.dev/gemini-api/docs/troubleshooting).
STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class GoogleWire:
    def __init__(self, reply: Reply, request: Recorded) -> None:
        self.reply = reply
        self.request = request

    def opening(self) -> list[str]:
        return []

    def content(self, step: Content) -> list[str]:
        if isinstance(step, Text):
            return [self._chunk([{"text": step.text}])]
        if isinstance(step, Thinking):
            return [self._chunk([{"text": step.text, "thought": True}])]
        call: dict[str, Any] = {"name": step.name, "args": json.loads(step.arguments)}
        if step.id is not None:
            call["id"] = step.id
        return [self._chunk([{"functionCall": call}])]

    def closing(self) -> list[str]:
        # Gemini says STOP after tool calls too; the usage comes with the last chunk.
        return [self._chunk([{"text": ""}], finish="STOP")]

    def failure(self, fail: Fail) -> list[str]:
        return [sse(self.error_body(fail))]

    @staticmethod
    def error_body(fail: Fail) -> dict[str, Any]:
        status = STATUSES.get(fail.status, "UNKNOWN")
        error: dict[str, Any] = {"code": fail.status, "message": fail.message, "status": status}
        if fail.retry_after is not None:  # Gemini says when to retry in the body, not in a header
            retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{fail.retry_after}s"}
            error["details"] = [retry]
        return {"error": error}

    def _chunk(self, parts: list[dict[str, Any]], finish: str | None = None) -> str:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        response: dict[str, Any] = {
            "candidates": [candidate],
            "modelVersion": self.request.model,
            "responseId": f"standin-{self.request.index}",
        }
        if finish is not None:
            candidate["finishReason"] = finish
            tokens = self.reply.input_tokens, self.reply.output_tokens
            response["usageMetadata"] = {
                "promptTokenCount": tokens[0],
                "candidatesTokenCount": tokens[1],
                "totalTokenCount": sum(tokens),
            }
        return sse(response)
