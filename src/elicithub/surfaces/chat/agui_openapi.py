"""What /openapi.json says of `POST /run/agui` and `POST /run/agui/{agent}`: the body, the stream, the errors.

The AG-UI surface serves these paths with routes of its own (agui.py), which check who asks before they read the
body and answer in AG-UI's terms. The routes here only lend FastAPI their signatures; the app includes them after
the surface's own when /openapi.json is first built (server/openapi.py), so that no request ever reaches them.
"""

from __future__ import annotations

from typing import Annotated, Any

from ag_ui.core import RunAgentInput
from fastapi import APIRouter, Path
from pydantic import Field
from starlette.responses import Response

from elicithub.surfaces.bodies import ID
from elicithub.surfaces.responses import ErrorBody, EventStream, stream


class RunAgentBody(RunAgentInput):
    """AG-UI's `RunAgentInput`, in its camelCase JSON. A new message is the last of `messages` (a user message, or
    the `tool` messages of the calls of front-end tools the last run left to the client); `resume` answers every
    open interrupt of the thread. `tools` are offered to the model beside the agent's own; `context` is added to
    its instructions."""

    thread_id: str = Field(
        description="The conversation, per user: 1-128 characters of A-Z a-z 0-9 . _ ~ -", json_schema_extra=ID
    )


_EVENTS = (
    "AG-UI events: `RUN_STARTED`, then `TEXT_MESSAGE_*`, `REASONING_*`, `TOOL_CALL_*` and `TOOL_CALL_RESULT` as the "
    "model streams, and `RUN_FINISHED` (its `outcome` an `interrupt` with one interrupt per open question, when the "
    "run waits on some; `success` with `pendingToolCallIds` when it left calls of front-end tools to the client). "
    "Input that does not conform is `RUN_STARTED` then `RUN_ERROR` (`code`: `invalid_payload`, `unknown_interrupt`, "
    "`unknown_tool_call`, `resume_incomplete`, `interrupts_pending` or `expired`), and nothing of it is taken."
)
_EVENT = {
    "type": "object",
    "properties": {"data": {"type": "string", "description": "One AG-UI event, JSON."}},
    "required": ["data"],
}
_ERRORS = {
    401: "No bearer token, or one that names no user: no stream.",
    413: "The body is larger than limits.max_body_bytes.",
    422: "A body that is not a `RunAgentInput` (the message names the field), or a `threadId` outside its pattern.",
    503: "The identity provider cannot be reached to check the token.",
}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    **stream(_EVENTS, event=_EVENT),
    **{status: {"model": ErrorBody, "description": why} for status, why in _ERRORS.items()},
}

AgentName = Annotated[
    str, Path(description="The agent's id (config `agents:`); a name that is no agent's runs the default one.")
]

documented = APIRouter()


@documented.post("/run/agui", response_class=EventStream, responses=_RESPONSES)
async def run_default_agent(body: RunAgentBody) -> Response:
    """Run the default agent on the thread, or resume its interrupts."""
    raise NotImplementedError("served by elicithub.surfaces.chat.agui")


@documented.post("/run/agui/{agent}", response_class=EventStream, responses=_RESPONSES)
async def run_agent(agent: AgentName, body: RunAgentBody) -> Response:
    """Run that agent on the thread, or resume its interrupts (a resume goes on with the run it resumes)."""
    raise NotImplementedError("served by elicithub.surfaces.chat.agui")
