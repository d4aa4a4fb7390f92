"""Where an MCP tool call stopped for input, as its run's pause records it (`Pause.state`): what a resumed run (after
a restart, or on another instance) needs to go on from there."""

from __future__ import annotations

from typing import Literal, TypedDict

from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import RerunState

Shape = Literal["2026-07-28", "draft", "2025-11-25"]
"""How a downstream server speaks tasks. 2026-07-28: questions on `tasks/get`, answers by `tasks/update`. draft:
questions on `tasks/result` with a `requestState`, answers by `tasks/update` or, where the server does not know it,
`tasks/input_response`. 2025-11-25: questions as related-task `elicitation/create` on the `tasks/result` stream."""


class RoundState(TypedDict):
    """Waiting on a 2026-07-28 round's answers: the round as the server sent it (an `InputRequiredResult`), and how
    many rounds the call has had, this one included."""

    kind: Literal["mrtr"]
    request_state: str | None
    input_requests: JsonObject
    rounds: int


class TaskState(TypedDict):
    """Following a downstream task: which, how its server speaks, the input request keys answered over its life, and
    the `request_state` of the round it is in (the earlier draft's)."""

    kind: Literal["task"]
    task_id: str
    shape: Shape
    answered: list[str]
    rounds: int
    old_update: bool
    request_state: str | None


McpState = RoundState | TaskState | RerunState
"""An MCP call's pause: in a round, following a task, or to be made again (a 2025-11-25 question outside a task,
whose open request cannot outlive the hub)."""
