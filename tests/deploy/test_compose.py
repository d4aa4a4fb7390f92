"""deploy/compose.yaml under podman-compose, with each profile's store: two hubs behind the front door, the demo's
servers in a service of their own; a question asked through the front door survives the death of the hub that
streamed it."""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port, sse_data
from tests.deploy.engine import REPO, Engine

COMPOSE = REPO / "deploy" / "compose.yaml"
DEADLINE_S = 300
pytestmark = pytest.mark.timeout(1800)  # the first test to run builds the stand-in bases and the hub image
"""Only ends a test that would hang: a loaded machine takes minutes to start five containers on vfs."""


@dataclass
class Stack:
    engine: Engine
    project: str
    url: str

    def hubs(self) -> list[str]:
        """The names of the hub containers, hub-1's first."""
        label = f"label=io.podman.compose.project={self.project}"
        listed = self.engine.podman("ps", "--all", "--filter", label, "--format", "{{.Names}}")
        return sorted(n for n in listed.split() if "_hub-" in n)

    def logs(self, container: str) -> str:
        return self.engine.podman("logs", container, check=False)


@pytest.fixture(params=["redis", "postgres"])
def stack(
    request: pytest.FixtureRequest, engine: Engine, hub_image: str, standins: dict[str, str], name: str, tmp_path: Path
) -> Iterator[Stack]:
    key = tmp_path / "secret.key"
    key.write_text(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode() + "\n")
    os.chown(key, 10001, 10001)  # the hubs' user reads it; nobody else
    key.chmod(0o600)
    port = free_port()
    env = {
        "ELICITHUB_IMAGE": hub_image,
        "NGINX_IMAGE": standins["nginx"],
        "REDIS_IMAGE": standins["redis"],
        "POSTGRES_IMAGE": standins["postgres"],
        "ELICITHUB_FRONT_DOOR_PORT": str(port),
        "ELICITHUB_SECRET_KEY_FILE": str(key),
    }
    compose = ["podman-compose", "-f", str(COMPOSE), "-p", name, "--profile", request.param]
    try:
        engine.run([*compose, "up", "--detach"], env=env, timeout=DEADLINE_S)
        running = Stack(engine, name, f"http://127.0.0.1:{port}")
        for hub in running.hubs():
            wait_healthy(running, hub)
        wait_front_door(running)
        yield running
    finally:
        take_down(engine, name)


def take_down(engine: Engine, project: str) -> None:
    """What `podman-compose down --volumes` removes, in a few podman calls (it removes each container in turn, which
    takes most of a minute on a busy machine)."""
    label = f"label=io.podman.compose.project={project}"
    containers = engine.podman("ps", "--all", "--quiet", "--filter", label).split()
    if containers:
        engine.podman("rm", "--force", "--time", "0", *containers, check=False)
    volumes = engine.podman("volume", "ls", "--quiet", "--filter", label).split()
    if volumes:
        engine.podman("volume", "rm", "--force", *volumes, check=False)
    networks = engine.podman("network", "ls", "--quiet", "--filter", label).split()
    if networks:
        engine.podman("network", "rm", "--force", *networks, check=False)


def wait_front_door(stack: Stack) -> None:
    """Until the front door passes `/readyz` through: nginx exits until both hubs exist, then is restarted."""
    end = time.monotonic() + DEADLINE_S
    while True:
        try:
            if httpx.get(f"{stack.url}/readyz", timeout=10).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > end:
            label = f"label=io.podman.compose.project={stack.project}"
            listed = stack.engine.podman("ps", "--all", "--filter", label, "--format", "{{.Names}} {{.Status}}")
            raise AssertionError(f"the front door never passed /readyz through:\n{listed}")
        time.sleep(0.1)


def wait_healthy(stack: Stack, container: str) -> None:
    """Until the container's compose healthcheck (its /readyz) passes; podman stores it but runs it only when told."""
    end = time.monotonic() + DEADLINE_S
    while not stack.engine.podman_succeeds("healthcheck", "run", container):
        if time.monotonic() > end:
            raise AssertionError(f"{container} never turned ready; it logged:\n{stack.logs(container)}")
        time.sleep(0.5)


def eventually(condition: Any, what: str) -> Any:
    end = time.monotonic() + DEADLINE_S
    while not (found := condition()):
        assert time.monotonic() < end, what
        time.sleep(0.5)
    return found


def deploy(service: str) -> dict[str, Any]:
    text = f'/call deploy.deploy_service {{"service": "{service}"}}'
    return {"stream": True, "messages": [{"role": "user", "content": text}]}


def contents(response: httpx.Response) -> Iterator[str]:
    for chunk in sse_data(response):
        if chunk["choices"]:
            yield chunk["choices"][0]["delta"].get("content") or ""


def question(stream: Iterator[str]) -> dict[str, Any]:
    """The first question on a chat stream: it arrives while the stream waits for its answer (the front door does
    not buffer the stream)."""
    seen = []
    for content in stream:
        if content.startswith('{"type": "elicitation-request"'):
            request: dict[str, Any] = json.loads(content)
            return request
        seen.append(content)
    raise AssertionError(f"the stream ended with no question: {''.join(seen)!r}")


def answer(browser: httpx.Client, conversation: str, request: dict[str, Any], region: str) -> httpx.Response:
    body = {
        "conversationId": conversation,
        "elicitationId": request["elicitationId"],
        "action": "accept",
        "content": {"region": region, "confirm": True},
    }
    return browser.post("/run/api/elicitation-responses", json=body)


def chats_served(stack: Stack, hub: str) -> int:
    return stack.logs(hub).count('"POST /run/v1/chat/completions HTTP/1.1" 200')


def test_a_question_pending_when_its_hub_dies_is_answered_and_its_run_finishes_on_the_other(stack: Stack) -> None:
    # A chat client that shows questions says so; the page's session cookie names the user.
    headers = {"x-supports-elicitation": "true"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=httpx.Timeout(30, read=DEADLINE_S)) as browser:
        browser.get("/")  # the demo signs the browser in (a session cookie both hubs accept)
        assert browser.get("/run/api/me").json() == {"user": "dev"}

        with browser.stream("POST", "/run/v1/chat/completions", json=deploy("orders")) as response:
            assert response.status_code == 200
            stream = contents(response)
            request = question(stream)
            assert answer(browser, response.headers["x-conversation-id"], request, "eu-west-1").status_code == 200
            assert (
                "".join(c for c in stream if not c.startswith("{")) == "Deployed orders to eu-west-1 with 2 replicas."
            )

        served = {hub: chats_served(stack, hub) for hub in stack.hubs()}
        with browser.stream("POST", "/run/v1/chat/completions", json=deploy("billing")) as response:
            conversation = response.headers["x-conversation-id"]
            request = question(contents(response))
            [streaming] = [hub for hub in served if chats_served(stack, hub) > served[hub]]
            stack.engine.podman("rm", "--force", "--time", "0", streaming)  # SIGKILL: no drain, nothing handed over
        assert len(stack.hubs()) == 1

        # The front door sends the answer to the hub still standing, which takes the dead hub's run over.
        answered = eventually(
            lambda: (r := answer(browser, conversation, request, "us-east-1")).status_code == 200 and r,
            "the answer was never taken",
        )
        assert answered.json() == {"elicitationId": request["elicitationId"], "outcome": "accepted"}
        last = {"role": "assistant", "text": "Deployed billing to us-east-1 with 2 replicas."}
        eventually(
            lambda: browser.get(f"/run/api/conversations/{conversation}").json()["messages"][-1] == last,
            "the run never finished on the other hub",
        )
