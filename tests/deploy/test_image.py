"""The hub's image, built from the repository's Dockerfile: its contract, and the demo it runs with no config."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import free_port
from tests.deploy.engine import REPO, Engine

pytestmark = pytest.mark.timeout(1800)  # the first test to run builds the stand-in bases and the hub image


def test_the_dockerfile_passes_hadolint() -> None:
    done = subprocess.run(["hadolint", str(REPO / "Dockerfile")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_runs_elicithub_serve_as_uid_10001_in_data(engine: Engine, hub_image: str) -> None:
    [image] = json.loads(engine.podman("image", "inspect", hub_image))
    config = image["Config"]
    assert config["User"] == "10001"
    assert config["WorkingDir"] == "/data"
    assert "8700/tcp" in config["ExposedPorts"]
    assert config["Entrypoint"] == ["elicithub"]
    assert config["Cmd"] == ["serve", "--host", "0.0.0.0"]


def wait_ready(url: str, container: str, engine: Engine, deadline_s: float = 180) -> httpx.Response:
    """The first 200 from `url`; the deadline only ends a test that would hang (a loaded machine starts slowly)."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            response = httpx.get(url, timeout=5)
            if response.status_code == 200:
                return response
        except httpx.TransportError:
            pass
        if time.monotonic() > end:
            logs = engine.podman("logs", container, check=False)
            raise AssertionError(f"{url} never answered 200; the container logged:\n{logs}")
        time.sleep(0.2)


@pytest.fixture
def demo_container(engine: Engine, hub_image: str, name: str) -> Iterator[tuple[str, int]]:
    """The image as `docker run` starts it, with no config, on a read-only root as on Kubernetes: only /data and
    /tmp are writable."""
    port = free_port()
    engine.podman("network", "create", name)
    try:
        engine.podman(
            "run",
            "--detach",
            "--name",
            name,
            "--network",
            name,
            "--publish",
            f"127.0.0.1:{port}:8700",
            "--read-only",
            "--volume",
            f"{name}:/data",  # a new volume starts as the image's /data: owned by the hub's user
            "--tmpfs",
            "/tmp:rw,mode=1777",
            hub_image,
        )
        yield name, port
    finally:
        engine.podman("rm", "--force", "--time", "0", name, check=False)
        engine.podman("volume", "rm", "--force", name, check=False)
        engine.podman("network", "rm", "--force", name, check=False)


def test_the_image_serves_the_demo_as_non_root_and_answers_readyz(
    engine: Engine, demo_container: tuple[str, int]
) -> None:
    container, port = demo_container
    ready = wait_ready(f"http://127.0.0.1:{port}/readyz", container, engine)
    assert ready.json() == {"ready": True}
    assert engine.podman("exec", container, "id", "-u").strip() == "10001"
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as browser:
        browser.get("/")  # the demo signs the browser in as its dev user
        assert browser.get("/run/api/me").json() == {"user": "dev"}
    # The embedded store and the generated key land in the working directory.
    assert set(engine.podman("exec", container, "ls", "/data/.elicithub").split()) >= {"hub.db", "secret.key"}
