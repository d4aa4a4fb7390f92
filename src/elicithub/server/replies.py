"""Error replies: every error as JSON `{"error": {"code", "message"}}`, and the HTTP status of each package error."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

from elicithub.errors import (
    AlreadyResolved,
    BadRequest,
    Expired,
    HubError,
    IdentityUnavailable,
    InvalidContent,
    Limited,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    RateLimited,
    SelfApprovalRefused,
)
from elicithub.surfaces.gates import field_errors

STATUSES: list[tuple[type[HubError], int]] = [
    (PayloadTooLarge, 413),
    (BadRequest, 400),
    (NotFound, 404),
    (SelfApprovalRefused, 403),
    (AlreadyResolved, 409),
    (Expired, 410),
    (InvalidContent, 422),
    (RateLimited, 429),
    (Overloaded, 503),
    (IdentityUnavailable, 503),
]
"""How the package's errors map to HTTP statuses (the first match wins); anything else is a 500."""

CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    422: "invalid_request",
}
"""The code of an HTTP error raised by the server itself (not a package error, which names its own)."""


class ErrorResponse(JSONResponse):
    """JSON in ASCII: an error may quote what a client sent, lone surrogates included, and must still encode."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return ErrorResponse({"error": {"code": code, "message": message, **extra}}, status_code=status)


def hub_error(exc: HubError) -> JSONResponse:
    status = next((s for kind, s in STATUSES if isinstance(exc, kind)), 500)
    if isinstance(exc, InvalidContent):
        return error(status, exc.code, str(exc), fields=field_errors(exc))
    response = error(status, exc.code, str(exc))
    if isinstance(exc, Limited):
        response.headers["retry-after"] = str(exc.retry_after_s)
    return response


def http_error(status: int, detail: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    response = error(status, CODES.get(status, "error"), detail)
    if headers:
        response.headers.update(headers)
    return response
