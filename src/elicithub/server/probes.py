"""What load balancers, orchestrators and monitoring read: `/readyz` (liveness is `/healthz`, in routes.py), and
`/metrics` unless `metrics.enabled` is false."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from elicithub.metrics import CONTENT_TYPE
from elicithub.server.hub import Hub
from elicithub.server.replies import error

CHECK_TIMEOUT_S = 3.0
"""A store that takes longer than this to answer a probe is as good as down for new traffic."""


def probes(hub: Hub) -> APIRouter:
    router = APIRouter()

    @router.get("/readyz", responses={503: {"description": "Not ready: the store, its schema, or a drain."}})
    async def readyz() -> JSONResponse:
        """200 while this hub should get traffic: its store answers with the schema it knows, and it is not
        draining (after SIGTERM); else 503 saying why."""
        why = await readiness(hub)
        if why is not None:
            return error(503, "not_ready", why)
        return JSONResponse({"ready": True})

    if hub.metrics.enabled:

        @router.get(
            "/metrics",
            response_class=Response,
            responses={200: {"description": "This hub's metrics.", "content": {"text/plain": {}}}},
        )
        async def metrics() -> Response:
            """This hub's metrics in Prometheus text format: its questions, runs and HTTP requests."""
            return Response(hub.metrics.exposition(), media_type=CONTENT_TYPE)

    return router


async def readiness(hub: Hub) -> str | None:
    if hub.draining:
        return "draining: this hub is shutting down"
    try:
        return await asyncio.wait_for(hub.backend.ready(), CHECK_TIMEOUT_S)
    except TimeoutError:
        return f"the store did not answer within {CHECK_TIMEOUT_S:g} s"
