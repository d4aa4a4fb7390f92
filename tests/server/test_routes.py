"""The hub's routes are built with the hub they serve: an app composed of them by hand, holding nothing for them,
serves that hub."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI

from elicithub.config import parse_config
from elicithub.server.hub import Hub
from elicithub.server.routes import hub_routes
from elicithub.server.web import widget_routes
from tests.conftest import USERS, served


def test_an_app_composed_of_a_hubs_routes_serves_that_hub(tmp_path: Path) -> None:
    config = parse_config(
        {"store": {"url": "memory://"}, "secrets": {"key_file": str(tmp_path / "secret.key")}, "users": USERS}
    )
    hub = Hub(config, instance="composed")

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await hub.start()
        yield
        await hub.close()

    app = FastAPI(lifespan=lifespan)
    app.include_router(hub_routes(hub))
    app.include_router(widget_routes(hub))
    with served(app) as running:
        assert httpx.get(f"{running.url}/healthz").json()["instance"] == "composed"
        bearer = {"authorization": f"Bearer {USERS[0]['token']}"}
        assert httpx.get(f"{running.url}/run/api/me", headers=bearer).json() == {"user": USERS[0]["id"]}
