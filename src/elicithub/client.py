"""The Python client's first import path, kept so that code written against it runs on: it is `elicithub.clients`."""

from elicithub.clients import (
    ElicitationRequest,
    ElicitationResolved,
    Event,
    HubClient,
    RawEvent,
    Text,
    ToolCall,
    ToolResult,
)

__all__ = [
    "ElicitationRequest",
    "ElicitationResolved",
    "Event",
    "HubClient",
    "RawEvent",
    "Text",
    "ToolCall",
    "ToolResult",
]
