"""The ASGI app factory: routes, JSON errors, and the hub's lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from elicithub import __version__
from elicithub.config import Config
from elicithub.errors import HubError
from elicithub.server import openapi, web
from elicithub.server.chat_routes import Wire
from elicithub.server.hub import Hub
from elicithub.server.limits import BodyLimit
from elicithub.server.observed import Observed
from elicithub.server.probes import probes
from elicithub.server.replies import http_error, hub_error
from elicithub.server.routes import hub_routes
from elicithub.surfaces.bodies import field_name

log = logging.getLogger(__name__)


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


class HubApp(FastAPI):
    """FastAPI, with the chat and answer endpoints (server/chat_routes.py) taken before its middleware, routing and
    dependency machinery; every HTTP request, taken there or not, `observed` (metrics, and the hub's server span:
    FastAPI's own telemetry is off, so a request gets one, without its path or query, on either path)."""

    wire: Wire
    observed: Observed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan, a websocket
            await super().__call__(scope, receive, send)
            return
        path = self.wire.route(scope)
        if path is None:
            await self.observed(super().__call__, scope, receive, send, None)
        else:
            await self.observed(functools.partial(self.wire.serve, path), scope, receive, send, path)

    def openapi(self) -> dict[str, Any]:
        """/openapi.json, built once (FastAPI keeps it) with the routes that describe the surfaces built by their first
        request, every discriminated union's tag said to be required."""
        built = self.openapi_schema is not None
        if not built:
            for router in openapi.described_on_demand():
                self.include_router(router)
        document = super().openapi()
        if not built:
            openapi.tags_required(document)
        return document


class HubServer(uvicorn.Server):
    """uvicorn's server, with a drain: on SIGTERM the hub turns not-ready at once and serves `drain_s` more seconds
    (a load balancer stops sending it traffic meanwhile); then it ends its open chat streams (their runs are on
    record, their readers reattach elsewhere with `Last-Event-ID`), writes what it holds and exits 0. A second
    SIGTERM, or SIGINT, stops it at once."""

    def __init__(self, config: uvicorn.Config, hub: Hub, drain_s: float = 0) -> None:
        super().__init__(config)
        self._hub = hub
        self._drain_s = drain_s

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop runs yet: nothing to drain or end
            super().handle_exit(sig, frame)
            return
        if sig == signal.SIGTERM and not self._hub.draining and self._drain_s > 0 and not self.should_exit:
            self._hub.draining = True
            log.info("SIGTERM: not ready; serving for %g s more, then stopping", self._drain_s)
            loop.call_later(self._drain_s, self._stop)
            return
        if sig == signal.SIGTERM:
            self._stop()  # uvicorn would raise SIGTERM again after its shutdown: the exit status would not be 0
            return
        loop.call_soon(self._hub.streams.end_all)
        super().handle_exit(sig, frame)

    def _stop(self) -> None:
        self._hub.draining = True
        self._hub.streams.end_all()
        self.should_exit = True


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

    # FastAPI's own telemetry would use the process's providers, not the hub's, and record paths, queries and
    # exception messages; the hub makes its own server span (server/observed.py).
    app = HubApp(
        title="elicithub",
        version=__version__,
        lifespan=lifespan,
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.wire = Wire(hub)
    app.add_middleware(BodyLimit, max_bytes=config.limits.max_body_bytes)
    app.include_router(hub_routes(hub))
    app.include_router(probes(hub))
    for surface in hub.surfaces:
        app.router.routes.extend(surface.routes)
    app.router.routes.extend(hub.resource.routes)
    app.include_router(hub.admin_pages.router)
    app.include_router(hub.audit_pages.router)
    app.include_router(hub.inbox_pages.router)
    app.include_router(hub.sign_in_pages.router)
    app.include_router(hub.provider_sign_in.router)
    redact_access_log()
    app.include_router(web.widget_routes(hub))
    app.mount(web.STATIC_PATH, web.static_files(), name="static")
    app.observed = Observed(hub.metrics, app.router.routes)

    @app.exception_handler(HubError)
    async def _hub_error(_: Request, exc: HubError) -> JSONResponse:
        return hub_error(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{field_name(tuple(e['loc']))}: {e['msg']}" for e in exc.errors()]
        return http_error(422, "; ".join(problems))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return http_error(exc.status_code, str(exc.detail), exc.headers)

    return app
