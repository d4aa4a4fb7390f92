"""Reading `POST /run/agui` as an AG-UI client would: every event validated with `ag-ui-protocol`'s own models, and
each stream with the `ag-ui-validate` conformance rules."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from ag_ui.core import BaseEvent, Event, Interrupt, RunFinishedEvent, RunFinishedInterruptOutcome
from ag_ui_validate.pytest_plugin import assert_valid_agui
from pydantic import BaseModel, TypeAdapter

from tests.conftest import USERS, HubAddress

EVENT: TypeAdapter[Any] = TypeAdapter(Event)


def _no_extras(model: BaseModel, where: str) -> None:
    """The models keep unknown fields rather than refuse them: a field the protocol does not define is a failure."""
    assert not model.model_extra, f"{where}: fields AG-UI does not define: {sorted(model.model_extra or {})}"
    for name in type(model).model_fields:
        value = getattr(model, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                _no_extras(item, f"{where}.{name}")


RESUMED = {"AGUI207": "off"}
"""ag-ui-validate 0.4.0 judges each run alone, so its AGUI207 ("TOOL_CALL_RESULT for a call never started") refuses
what AG-UI 1.0's interrupts page asks of a resumed run: the result against the interrupted run's `toolCallId`,
with no new TOOL_CALL_START. The official client takes it (tests/surfaces/chat/test_agui_client.py)."""


def events_of(response: httpx.Response, resumed: bool = False) -> list[BaseEvent]:
    """Each SSE `data:` line as the AG-UI event it is, validated; the stream as a whole checked for conformance."""
    assert response.status_code == 200, response.read()
    assert response.headers["content-type"].startswith("text/event-stream")
    sent = [json.loads(line.removeprefix("data: ")) for line in response.iter_lines() if line.startswith("data: ")]
    return checked(sent, resumed)


def checked(sent: list[Any], resumed: bool = False) -> list[BaseEvent]:
    """A stream's `data:` payloads as the AG-UI events they are, each validated, the stream checked as a whole."""
    assert_valid_agui(sent, severity_overrides=RESUMED if resumed else None, max_warnings=0)
    events = []
    for data in sent:
        event: BaseEvent = EVENT.validate_python(data)
        _no_extras(event, event.type.value)
        events.append(event)
    return events


def run_input(thread_id: str, text: str | None = None, resume: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A `RunAgentInput` as HttpAgent sends one (camelCase JSON)."""
    messages = [] if text is None else [{"id": str(uuid.uuid4()), "role": "user", "content": text}]
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    return body


def run(hub: HubAddress, body: dict[str, Any], user: str = "alice", path: str = "/run/agui") -> list[BaseEvent]:
    token = next(u["token"] for u in USERS if u["id"] == user)
    headers = {"authorization": f"Bearer {token}", "accept": "text/event-stream"}
    with (
        httpx.Client(base_url=hub.url, headers=headers, timeout=60) as client,
        client.stream("POST", path, json=body) as response,
    ):
        events = events_of(response, resumed=bool(body.get("resume")))
    assert events[0].type.value == "RUN_STARTED"
    assert events[0].run_id == body["runId"] and events[0].thread_id == body["threadId"]  # type: ignore[attr-defined]
    return events


def kinds(events: list[BaseEvent]) -> list[str]:
    return [e.type.value for e in events]


def interrupts(events: list[BaseEvent]) -> list[Interrupt]:
    """The interrupts the stream ended on (it must end on them)."""
    last = events[-1]
    assert isinstance(last, RunFinishedEvent) and isinstance(last.outcome, RunFinishedInterruptOutcome), kinds(events)
    return last.outcome.interrupts


def text(events: list[BaseEvent]) -> str:
    return "".join(getattr(e, "delta", "") for e in events if e.type.value == "TEXT_MESSAGE_CONTENT")


def resolved(interrupt_id: str, payload: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"interruptId": interrupt_id, "status": "resolved"}
    if payload is not None:
        entry["payload"] = payload
    return entry


def cancelled(interrupt_id: str) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "cancelled"}
