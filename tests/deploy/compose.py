"""A Compose project of deploy/ under podman-compose, on the test images, and what its tests do through the front door:
bring it up, replace a hub as a rollout does, sign a browser in, chat, answer."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from elicithub.auth.keys import load_keys
from elicithub.config import SecretsConfig
from elicithub.server.identity import SESSION_COOKIE, Identity
from elicithub.server.resource_metadata import ProtectedResource
from tests.conftest import sse_data
from tests.deploy.engine import REPO, Engine

DEADLINE_S = 300
"""Only ends a wait that would hang: a loaded machine takes minutes to start five containers on vfs."""
DRAIN_S = 10
"""The hubs' `server.drain_s` in deploy/hub.yaml (the default)."""


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
    profile: str = ""
    env: dict[str, str] = field(default_factory=dict)
    """The profile and the environment of the last `up`, which later commands of the project run with."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def compose(self, *args: str) -> str:
        command = [
            "podman-compose",
            "-f",
            str(self.folder / "compose.yaml"),
            "-p",
            self.name,
            "--profile",
            self.profile,
        ]
        return self.engine.run([*command, *args], env=self.env, timeout=DEADLINE_S)

    def up(self, profile: str, key_file: Path | None = None) -> None:
        """`up --detach`, given no key unless `key_file`; returns once both hubs and the front door are ready."""
        self.profile = profile
        self.env = {
            **self.images,
            "ELICITHUB_FRONT_DOOR_PORT": str(self.port),
            "ELICITHUB_SECRET_KEY": "",
            "ELICITHUB_SECRET_KEY_FILE": "" if key_file is None else str(key_file),
        }
        self.compose("up", "--detach")
        for hub in self.hubs():
            wait_healthy(self, hub)
        wait_front_door(self)

    def replace(self, hub: str) -> tuple[int, str]:
        """Replace a hub as a rollout does (docs/deploy.md): stop it (SIGTERM: it drains, then exits within the grace
        period compose gives it), start a new container in its place, wait until it is ready, and have the front door
        look its address up again. Returns the stopped hub's exit status and what it logged."""
        service = hub.split("_")[1]
        self.compose("stop", service)
        status = int(self.engine.podman("inspect", "--format", "{{.State.ExitCode}}", hub))
        logged = self.logs(hub)
        self.compose("up", "--detach", "--no-deps", "--force-recreate", service)
        wait_healthy(self, hub)
        self.engine.podman("exec", f"{self.name}_front-door_1", "nginx", "-s", "reload")
        return status, logged

    def health(self, hub: str) -> dict[str, Any]:
        """The hub's own `/healthz`, asked inside its container (the front door would pick a hub)."""
        script = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8700/healthz').read().decode())"
        found: dict[str, Any] = json.loads(self.engine.podman("exec", hub, "python3", "-c", script))
        return found

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
        """What the container wrote, on stdout (the access log) and stderr (the hub's own lines) alike."""
        command = ["podman", "logs", container]
        merged = subprocess.run(
            command, env=self.engine.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        return merged.stdout

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
            label = f"label=io.podman.compose.project={stack.name}"
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
