"""The events a run puts on its stream, independent of any wire format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elicithub.core.elicitation import Elicitation, Outcome


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolCallFinished:
    call_id: str
    name: str
    text: str
    is_error: bool


@dataclass(frozen=True)
class ElicitationRequested:
    elicitation: Elicitation


@dataclass(frozen=True)
class ElicitationResolved:
    elicitation_id: str
    outcome: Outcome


@dataclass(frozen=True)
class RunFinished:
    """The last event of a run's stream."""

    reason: str = "stop"


StreamEvent = TextDelta | ToolCallStarted | ToolCallFinished | ElicitationRequested | ElicitationResolved | RunFinished


def request_event(elicitation: Elicitation) -> dict[str, Any]:
    """The public `elicitation-request` event (DESIGN.md, Events)."""
    event: dict[str, Any] = {
        "type": "elicitation-request",
        "elicitationId": elicitation.id,
        "mode": elicitation.mode,
        "message": elicitation.message,
    }
    if elicitation.mode == "form":
        event["requestedSchema"] = elicitation.requested_schema
    else:
        event["url"] = elicitation.url
    event["context"] = elicitation.context
    event["expiresAt"] = elicitation.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return event


def resolved_event(elicitation_id: str, outcome: Outcome) -> dict[str, Any]:
    return {"type": "elicitation-resolved", "elicitationId": elicitation_id, "outcome": outcome}
