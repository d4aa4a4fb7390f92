"""deploy/compose.yaml under podman-compose, with each profile's store, from a clean copy of deploy/ and no key of
anyone's: two hubs behind the front door, the demo's servers in a service of their own, the master key made by the
`key` service; a question asked through the front door survives the death of the hub that streamed it. The made key
outlives `down` and `up`, and a key file given wins over it."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from elicithub.auth.keys import load_keys
from elicithub.config import SecretsConfig
from elicithub.server.identity import SESSION_COOKIE, Identity
from elicithub.server.resource_metadata import ProtectedResource
from tests.conftest import free_port, sse_data
from tests.deploy.engine import REPO, Engine

DEADLINE_S = 300
pytestmark = pytest.mark.timeout(1800)  # the first test to run builds the stand-in bases and the hub image
"""Only ends a test that would hang: a loaded machine takes minutes to start five containers on vfs."""


def clean_copy(into: Path) -> Path:
    """deploy/ as a fresh clone has it: the files git tracks, and no key file."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "deploy"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    for name in filter(None, listed.split("\0")):
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, into / name)
    return into / "deploy"


@dataclass
class Project:
    """One Compose project of a clean copy of deploy/, on the test images."""

    engine: Engine
    name: str
    folder: Path
    images: dict[str, str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self, profile: str, key_file: Path | None = None) -> None:
        """`up --detach`, given no key unless `key_file`; returns once both hubs and the front door are ready."""
        env = {
            **self.images,
            "ELICITHUB_FRONT_DOOR_PORT": str(self.port),
            "ELICITHUB_SECRET_KEY": "",
            "ELICITHUB_SECRET_KEY_FILE": "" if key_file is None else str(key_file),
        }
        compose = ["podman-compose", "-f", str(self.folder / "compose.yaml"), "-p", self.name, "--profile", profile]
        self.engine.run([*compose, "up", "--detach"], env=env, timeout=DEADLINE_S)
        for hub in self.hubs():
            wait_healthy(self, hub)
        wait_front_door(self)

    def down(self, *, volumes: bool) -> None:
        """What `podman-compose down` removes (with `--volumes`, the volumes too), in a few podman calls: it removes
        each container in turn, which takes most of a minute on a busy machine."""
        label = f"label=io.podman.compose.project={self.name}"
        containers = self.engine.podman("ps", "--all", "--quiet", "--filter", label).split()
        if containers:
            self.engine.podman("rm", "--force", "--time", "0", *containers, check=False)
        kinds = ("volume", "network") if volumes else ("network",)
        for kind in kinds:
            found = self.engine.podman(kind, "ls", "--quiet", "--filter", label).split()
            if found:
                self.engine.podman(kind, "rm", "--force", *found, check=False)

    def hubs(self) -> list[str]:
        """The names of the hub containers, hub-1's first."""
        label = f"label=io.podman.compose.project={self.name}"
        listed = self.engine.podman("ps", "--all", "--filter", label, "--format", "{{.Names}}")
        return sorted(n for n in listed.split() if "_hub-" in n)

    def logs(self, container: str) -> str:
        return self.engine.podman("logs", container, check=False)

    def made_key(self) -> str | None:
        """The key file the `key` service made in its volume, if it made one."""
        volume = self.engine.podman("volume", "inspect", "--format", "{{.Mountpoint}}", f"{self.name}_key")
        made = Path(volume.strip()) / "secret.key"
        return made.read_text() if made.exists() else None

    def users(self, cookie: str) -> set[str | None]:
        """Whom the hubs take a session cookie for, asked through the front door often enough to reach both."""
        with httpx.Client(base_url=self.url, cookies={SESSION_COOKIE: cookie}, timeout=30) as browser:
            return {browser.get("/run/api/me").json()["user"] for _ in range(4)}


def session(key: str, user: str) -> str:
    """The session cookie that a hub whose master key is `key` (a key file's text) gives `user`."""
    keys = load_keys(SecretsConfig(), environ={"ELICITHUB_SECRET_KEY": key})
    return Identity([], keys.derive("session"), "http://hub", ProtectedResource("http://hub", None)).session_token(user)


@pytest.fixture
def project(engine: Engine, hub_image: str, standins: dict[str, str], name: str, tmp_path: Path) -> Iterator[Project]:
    images = {
        "ELICITHUB_IMAGE": hub_image,
        "NGINX_IMAGE": standins["nginx"],
        "REDIS_IMAGE": standins["redis"],
        "POSTGRES_IMAGE": standins["postgres"],
    }
    made = Project(engine, name, clean_copy(tmp_path), images, free_port())
    try:
        yield made
    finally:
        made.down(volumes=True)


@pytest.fixture(params=["redis", "postgres"])
def stack(request: pytest.FixtureRequest, project: Project) -> Project:
    """The profile's stack, up with no key given."""
    project.up(request.param)
    return project


def wait_front_door(stack: Project) -> None:
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


def wait_healthy(stack: Project, container: str) -> None:
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


def chats_served(stack: Project, hub: str) -> int:
    return stack.logs(hub).count('"POST /run/v1/chat/completions HTTP/1.1" 200')


def test_with_no_key_given_a_question_pending_when_its_hub_dies_is_answered_and_finishes_on_the_other(
    stack: Project,
) -> None:
    made = stack.made_key()
    assert made is not None
    assert stack.users(session(made, "alice")) == {"alice"}  # both hubs hold the key the `key` service made

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


def test_the_made_key_outlives_down_and_up_and_a_key_file_given_wins_over_it(project: Project, tmp_path: Path) -> None:
    project.up("redis")
    made = project.made_key()
    assert made is not None
    with httpx.Client(base_url=project.url, timeout=30) as browser:
        browser.get("/")  # the demo signs the browser in as dev: a cookie a hub signed
        issued = browser.cookies[SESSION_COOKIE]

    # `down` keeps the volumes: the next `up` makes no new key, and a session from before is still good.
    project.down(volumes=False)
    project.up("redis")
    assert project.made_key() == made
    assert project.users(issued) == {"dev"}
    assert project.users(session(made, "alice")) == {"alice"}

    # A key file given is the hubs' key from then on; the made one stays in its volume, unused.
    given = tmp_path / "secret.key"
    given.write_text(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode() + "\n")
    os.chown(given, 10001, 10001)  # the hubs' user reads it; nobody else
    given.chmod(0o600)
    project.down(volumes=False)
    project.up("redis", key_file=given)
    assert project.users(session(given.read_text(), "alice")) == {"alice"}
    assert project.users(issued) == {None}
    assert project.made_key() == made
