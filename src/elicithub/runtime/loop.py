"""The agent run loop: model turns and tool calls, with every step published on the run's stream."""

from __future__ import annotations

import json
import logging

from elicithub.core.bus import EventBus
from elicithub.core.events import RunFinished, StreamEvent, TextDelta, ToolCallFinished, ToolCallStarted
from elicithub.runtime.models import Message, Model
from elicithub.runtime.tools import CallContext, Tools

log = logging.getLogger(__name__)

MAX_STEPS = 8


class Runner:
    def __init__(self, model: Model, tools: Tools, bus: EventBus[StreamEvent]) -> None:
        self.model = model
        self.tools = tools
        self.bus = bus

    async def run(self, messages: list[Message], context: CallContext) -> None:
        """Run until the model answers without tool calls; always ends the stream with RunFinished."""
        publish = self.bus.publish
        reason = "stop"
        try:
            specs = await self.tools.list_tools(context)
            for _ in range(MAX_STEPS):
                turn = await self.model.complete(messages, specs)
                if turn.text:
                    publish(context.stream_id, TextDelta(turn.text))
                if not turn.tool_calls:
                    messages.append({"role": "assistant", "content": turn.text or ""})
                    break
                messages.append(
                    {
                        "role": "assistant",
                        "content": turn.text,
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                            }
                            for c in turn.tool_calls
                        ],
                    }
                )
                for call in turn.tool_calls:
                    publish(context.stream_id, ToolCallStarted(call.id, call.name, call.arguments))
                    outcome = await self.tools.call(call.name, call.arguments, context)
                    publish(context.stream_id, ToolCallFinished(call.id, call.name, outcome.text, outcome.is_error))
                    messages.append(
                        {"role": "tool", "tool_call_id": call.id, "content": outcome.text, "is_error": outcome.is_error}
                    )
            else:
                publish(context.stream_id, TextDelta("Stopped: the model kept calling tools."))
        except Exception as exc:
            log.exception("run on stream %s failed", context.stream_id)
            publish(context.stream_id, TextDelta(f"The run failed: {exc}"))
            reason = "error"
        finally:
            publish(context.stream_id, RunFinished(reason))
