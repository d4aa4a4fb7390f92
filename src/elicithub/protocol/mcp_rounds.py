"""The 2026-07-28 multi round-trip loop, once: shaped like the SDK's own input-required driver, with the I/O passed
in, so the hub's calls, a resumed round and the test runner all drive rounds the same way."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import mcp_types as mt

from elicithub.errors import HubError

ResultT = TypeVar("ResultT")

STATE_ONLY_BACKOFF_S = (0.05, 0.25)
"""First and longest sleep before retrying a round that carries only `requestState` (the SDK's values)."""


class RoundsExceeded(HubError):
    def __init__(self, max_rounds: int) -> None:
        super().__init__(f"kept asking for input for more than {max_rounds} rounds")
        self.max_rounds = max_rounds


class EmptyRound(HubError):
    def __init__(self) -> None:
        super().__init__("it returned an input-required result with nothing to ask and no requestState")


def is_input_required(data: Mapping[str, Any]) -> bool:
    """Whether a raw `tools/call` result is an InputRequiredResult: non-empty `inputRequests`, or a non-empty
    string `requestState`. Anything else (a half-shaped one included) is an ordinary result."""
    requests, state = data.get("inputRequests"), data.get("requestState")
    return (isinstance(requests, dict) and bool(requests)) or (isinstance(state, str) and bool(state))


def is_full_round(data: Mapping[str, Any]) -> bool:
    """The stricter rule the test runner holds servers to: non-empty `inputRequests` and a non-empty string
    `requestState`, both. A half-shaped result (a state-only "not yet" included) is an ordinary result there, so a
    suite shows it rather than waiting it out."""
    requests, state = data.get("inputRequests"), data.get("requestState")
    return isinstance(requests, dict) and bool(requests) and isinstance(state, str) and bool(state)


async def drive_rounds(
    first: ResultT | mt.InputRequiredResult,
    *,
    fulfil: Callable[[mt.InputRequiredResult, int], Awaitable[mt.InputResponses]],
    retry: Callable[[mt.InputResponses | None, str | None], Awaitable[ResultT | mt.InputRequiredResult]],
    max_rounds: int,
    rounds: int = 0,
) -> ResultT:
    """Resolve `first` to its final result: fulfil each round's input requests together, retry with them and the
    echoed `requestState`; a round with only state is retried after a back-off (reset by any round that asks).

    `fulfil(round, n)` gets the n-th round (counting from `rounds + 1`); raises RoundsExceeded past `max_rounds`,
    and EmptyRound for a round that is not one by `is_input_required` (the SDK parses `{"requestState": ""}` as one;
    retrying it would only back off until the cap).
    """
    delay = STATE_ONLY_BACKOFF_S[0]
    current = first
    while isinstance(current, mt.InputRequiredResult):
        if not is_input_required(current.model_dump(by_alias=True, exclude_none=True)):
            raise EmptyRound
        rounds += 1
        if rounds > max_rounds:
            raise RoundsExceeded(max_rounds)
        responses: mt.InputResponses | None = None
        if current.input_requests:
            delay = STATE_ONLY_BACKOFF_S[0]
            responses = await fulfil(current, rounds)
        else:
            await anyio.sleep(delay)
            delay = min(delay * 2, STATE_ONLY_BACKOFF_S[1])
        current = await retry(responses, current.request_state)
    return current
