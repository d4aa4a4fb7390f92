"""Fixtures for the container tests: the engine, the stand-in images (kept across sessions) and the hub's image
(built once per session, removed after it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.deploy.engine import Engine, tools_missing


@pytest.fixture(scope="session")
def engine() -> Engine:
    missing = tools_missing()
    if missing:
        pytest.fail(f"the container tests need {', '.join(missing)}: ./scripts/test installs them")
    running = Engine()
    running.prepare()
    return running


@pytest.fixture(scope="session")
def standins(engine: Engine) -> dict[str, str]:
    """The stand-in images by the official image each replaces (python, redis, postgres, nginx)."""
    return engine.standins()


@pytest.fixture(scope="session")
def hub_image(engine: Engine, standins: dict[str, str]) -> Iterator[str]:
    """The repository's Dockerfile built on the python stand-in."""
    tag = f"localhost/elicithub-test:{uuid.uuid4().hex[:8]}"
    engine.build_hub(tag, standins["python"])
    yield tag
    engine.podman("rmi", "--force", tag, check=False)
    # The build stage's image has no name once the build ends.
    engine.podman("image", "prune", "--force", check=False)


@pytest.fixture
def name() -> str:
    """A name for this test's containers, networks and projects that no other test or session uses."""
    return f"elicithub-test-{uuid.uuid4().hex[:8]}"
