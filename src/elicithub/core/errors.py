"""Errors raised by the broker when an answer cannot be taken; each knows its HTTP status."""

from __future__ import annotations

from elicithub.core.schema import FieldError


class ElicitationError(Exception):
    status = 400
    code = "bad_request"


class NotFound(ElicitationError):
    status = 404
    code = "not_found"

    def __init__(self, elicitation_id: str) -> None:
        super().__init__(f"No elicitation {elicitation_id!r} for this user.")


class AlreadyResolved(ElicitationError):
    status = 409
    code = "already_resolved"

    def __init__(self, elicitation_id: str, outcome: str) -> None:
        super().__init__(f"Elicitation {elicitation_id!r} was already {outcome} with a different answer.")


class Expired(ElicitationError):
    status = 410
    code = "expired"

    def __init__(self, elicitation_id: str) -> None:
        super().__init__(f"Elicitation {elicitation_id!r} has expired; the tool call was not completed.")


class InvalidContent(ElicitationError):
    status = 422
    code = "invalid_content"

    def __init__(self, elicitation_id: str, errors: list[FieldError]) -> None:
        super().__init__(f"The content does not match the requested schema of {elicitation_id!r}.")
        self.errors = errors
