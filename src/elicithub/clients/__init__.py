"""Clients of the hub: the Python client (`HubClient`, in hub.py), the terminal prompt and chat (the web widget's
static files live in web/)."""

from elicithub.clients.hub import (
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
