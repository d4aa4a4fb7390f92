"""The ASGI app factory: routes, JSON errors, and the hub's lifespan."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from elicithub import __version__
from elicithub.config import Config
from elicithub.errors import (
    AlreadyResolved,
    BadRequest,
    Expired,
    HubError,
    IdentityUnavailable,
    InvalidContent,
    NotFound,
    PayloadTooLarge,
)
from elicithub.server import routes, web
from elicithub.server.hub import Hub
from elicithub.server.limits import BodyLimit
from elicithub.surfaces import field_errors

STATUSES: list[tuple[type[HubError], int]] = [
    (PayloadTooLarge, 413),
    (BadRequest, 400),
    (NotFound, 404),
    (AlreadyResolved, 409),
    (Expired, 410),
    (InvalidContent, 422),
    (IdentityUnavailable, 503),
]
"""How the package's errors map to HTTP statuses (the first match wins); anything else is a 500."""


class ErrorResponse(JSONResponse):
    """JSON in ASCII: an error may quote what a client sent, lone surrogates included, and must still encode."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return ErrorResponse({"error": {"code": code, "message": message, **extra}}, status_code=status)


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "body"


class _RedactQuery(logging.Filter):
    """Access log lines keep the path but drop the query of auth pages: it carries link tokens and codes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3 and isinstance(record.args[2], str):
            path = record.args[2]
            if path.startswith("/auth/") and "?" in path:
                record.args = (*record.args[:2], path.split("?", 1)[0] + "?[redacted]", *record.args[3:])
        return True


def redact_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactQuery) for f in access.filters):
        access.addFilter(_RedactQuery())


def create_app(config: Config, hub: Hub | None = None) -> FastAPI:
    hub = hub if hub is not None else Hub(config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await hub.start()
        try:
            async with contextlib.AsyncExitStack() as lifespans:
                for surface in hub.surfaces:
                    await lifespans.enter_async_context(surface.lifespan())
                yield
        finally:
            await hub.close()

    app = FastAPI(title="elicithub", version=__version__, lifespan=lifespan)
    app.state.hub = hub
    app.add_middleware(BodyLimit, max_bytes=config.limits.max_body_bytes)
    app.include_router(routes.router)
    for surface in hub.surfaces:
        app.router.routes.extend(surface.routes)
    app.router.routes.extend(hub.resource.routes)
    app.include_router(hub.sign_in_pages.router)
    app.include_router(hub.provider_sign_in.router)
    redact_access_log()
    app.include_router(web.router)
    app.mount(web.STATIC_PATH, web.static_files(), name="static")

    @app.exception_handler(HubError)
    async def _hub_error(_: Request, exc: HubError) -> JSONResponse:
        status = next((s for kind, s in STATUSES if isinstance(exc, kind)), 500)
        if isinstance(exc, InvalidContent):
            return error(status, exc.code, str(exc), fields=field_errors(exc))
        return error(status, exc.code, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{_field(tuple(e['loc']))}: {e['msg']}" for e in exc.errors()]
        return error(422, "invalid_request", "; ".join(problems))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {
            400: "bad_request",
            401: "unauthorized",
            403: "forbidden",
            404: "not_found",
            405: "method_not_allowed",
            422: "invalid_request",
        }
        response = error(exc.status_code, codes.get(exc.status_code, "error"), str(exc.detail))
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    return app
