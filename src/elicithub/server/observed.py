"""Each HTTP request observed, whichever path serves it (the chat and answer endpoints, or FastAPI): counted by route
template and status when its response starts, timed until its body ends, and, with telemetry on, given a server span
that joins the caller's trace."""

from __future__ import annotations

from collections.abc import Sequence
from time import perf_counter

from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicithub import telemetry
from elicithub.metrics import UNMATCHED, Metrics


class Observed:
    """`routes`: the app's own, to name what FastAPI does not (it puts only its API routes in the scope)."""

    def __init__(self, metrics: Metrics, routes: Sequence[BaseRoute]) -> None:
        self._metrics = metrics
        self._plain = [r for r in routes if isinstance(r, Route | Mount) and not isinstance(r, APIRoute)]

    async def __call__(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, route: str | None) -> None:
        """Serve the request with `app`; `route`: its template when already known (the chat and answer endpoints)."""
        started = perf_counter()
        status: int | None = None
        # Taken before the app runs: routing rewrites the scope (a mount extends its root path).
        method: str = scope["method"]
        path: str = scope["path"]
        root: str = scope.get("root_path", "")

        async def sending(message: Message) -> None:
            nonlocal status, route
            if message["type"] == "http.response.start":
                status = message["status"]
                route = route or self._template(scope, method, path, root)
                self._metrics.request(route, message["status"])
            await send(message)

        with telemetry.serving(method, scope["headers"]) as span:
            try:
                await app(scope, receive, sending)
            except Exception:
                if status is None:  # the server answers 500
                    status = 500
                    route = route or self._template(scope, method, path, root)
                    self._metrics.request(route, status)
                raise
            finally:
                # The app returns once the body has ended (a stream's too), or its client has gone.
                if status is not None and route is not None:
                    self._metrics.took(route, perf_counter() - started)
                    span.answered(route, status)
                else:  # nothing answered: the client went away first
                    span.answered(route or self._template(scope, method, path, root), None)

    def _template(self, scope: Scope, method: str, path: str, root: str) -> str:
        """The route template of the request (never its path, which carries ids), or UNMATCHED."""
        taken = scope.get("route")
        if taken is None:
            probe = {"type": "http", "method": method, "path": path, "root_path": root}
            taken = next((r for r in self._plain if r.matches(probe)[0] is not Match.NONE), None)
        template = getattr(taken, "path_format", None)
        return template if isinstance(template, str) else UNMATCHED
