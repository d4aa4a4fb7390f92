"""A surface built on its first request: the SDK it stands on is imported then, not by every hub's start.

The app mounts routes at the paths the surface serves, with the methods it takes there (any other method gets its
405 without building anything). The first request to one builds the surface and starts its lifespan, in a task the
app's lifespan owns; that request and every later one go on to the surface's own routes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Generic, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus
from starlette.routing import BaseRoute, Route, Router
from starlette.types import Receive, Scope, Send

from elicithub.surfaces import Surface

S = TypeVar("S", bound=Surface)


class Deferred(Generic[S]):
    """The surface `build` makes, serving `paths` (each path's methods), made by the first request to one."""

    def __init__(self, build: Callable[[], S], paths: Mapping[str, Sequence[str]]) -> None:
        self._build = build
        self._router: Router | None = None
        self._starting = asyncio.Lock()
        self._running: tuple[TaskGroup, anyio.Event] | None = None
        """While the app's lifespan runs: the task group a built surface's lifespan runs in, and its end."""
        self.surface: S | None = None
        """The surface, once a request has built it."""
        first = _FirstRequest(self.started)
        self._routes: list[BaseRoute] = [
            Route(path, first, methods=list(methods), include_in_schema=False) for path, methods in paths.items()
        ]

    @property
    def routes(self) -> list[BaseRoute]:
        return self._routes

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Holds the task a built surface's own lifespan runs in; it ends that lifespan with its own."""
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            self._running = group, stop
            try:
                yield
            finally:
                self._running = None
                stop.set()

    async def started(self) -> Router:
        """The surface's routes, once it is built and its lifespan has started."""
        if self._router is None:
            async with self._starting:  # requests that come together build it once
                if self._router is None:
                    if self._running is None:
                        raise RuntimeError("the app's lifespan is not running: the surface cannot start")
                    group, stop = self._running
                    surface = self._build()
                    await group.start(self._run, surface, stop)
                    self.surface = surface
                    self._router = Router(surface.routes)
        return self._router

    @staticmethod
    async def _run(
        surface: Surface, stop: anyio.Event, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with surface.lifespan():
            task_status.started()
            await stop.wait()


class _FirstRequest:
    """The ASGI app at each of a deferred surface's paths (an object, so Starlette hands it the raw request)."""

    def __init__(self, started: Callable[[], Awaitable[Router]]) -> None:
        self._started = started

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        router = await self._started()
        await router(scope, receive, send)
