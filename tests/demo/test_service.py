"""`elicithub demo servers`: the demo's servers as a service of their own, and hubs whose config points at them."""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from elicithub.config import ConfigError, parse_config
from tests.conftest import USERS, RunningHub, eventually, sse_data

COMMAND = [sys.executable, "-c", "from elicithub.cli import main; main()", "demo", "servers"]


def four_free_ports() -> int:
    """The first of four consecutive ports that nothing listens on now, below the kernel's range for outgoing
    connections (32768 and up): a connection another test opens meanwhile cannot take one of them before the
    service binds it."""
    while True:
        first = random.randrange(20000, 32760)
        held = []
        try:
            for port in range(first, first + 4):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
        return first


def listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class DemoService:
    def __init__(self, port: int, *options: str) -> None:
        self.port = port
        self.process = subprocess.Popen(
            [*COMMAND, "--port", str(port), *options], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for each in range(port, port + 4):
            # A busy machine takes its time to import it all; a service that exited fails at once, with its output.
            eventually(lambda p=each: self.process.poll() is not None or listens(p), "the service listens", 120)
            if self.process.poll() is not None:
                pytest.fail(f"the demo service exited with {self.process.returncode}:\n{self.process.communicate()[0]}")

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        output = self.process.communicate(timeout=30)[0]
        return self.process.returncode, output


@pytest.fixture(scope="module")
def demo_service() -> Iterator[DemoService]:
    service = DemoService(four_free_ports(), "--public-host", "localhost")
    yield service
    service.stop()


def test_a_hub_with_demo_servers_host_asks_the_questions_of_the_demo_service(
    demo_service: DemoService, tmp_path: Path
) -> None:
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'hub.db'}"},
            "secrets": {"key_file": str(tmp_path / "secret.key")},
            "users": USERS,
            "demo": {"enabled": True, "servers_host": "127.0.0.1", "servers_port": demo_service.port},
        }
    )
    hub = RunningHub(config)
    try:
        urls = {s.id: s.url for s in hub.hub.config.mcp_servers}
        assert urls["deploy"] == f"http://127.0.0.1:{demo_service.port + 1}/mcp"
        assert [a.url for a in hub.hub.config.a2a_agents] == [f"http://127.0.0.1:{demo_service.port + 3}"]
        body = {
            "stream": True,
            "messages": [{"role": "user", "content": '/call deploy.deploy_service {"service": "orders"}'}],
        }
        with hub.client() as client, client.stream("POST", "/run/v1/chat/completions", json=body) as response:
            conversation = response.headers["x-conversation-id"]
            chunks = (c["choices"][0]["delta"].get("content", "") for c in sse_data(response) if c["choices"])
            request = json.loads(next(c for c in chunks if c.startswith('{"type": "elicitation-request"')))
            answer = {"region": "eu-west-1", "confirm": True}
            assert hub.answer("alice", conversation, request["elicitationId"], "accept", answer).status_code == 200
            rest = "".join(c for c in chunks if not c.startswith("{"))
        assert rest == "Deployed orders to eu-west-1 with 2 replicas."
    finally:
        hub.stop()


def test_the_demo_servers_name_themselves_by_the_public_host(demo_service: DemoService) -> None:
    port = demo_service.port
    issuer = httpx.get(f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server").json()["issuer"]
    assert issuer == f"http://localhost:{port}"
    card = httpx.get(f"http://127.0.0.1:{port + 3}/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"][0]["url"] == f"http://localhost:{port + 3}/a2a"


def test_a_service_name_names_the_servers_the_trackers_issuer_stays_on_loopback_and_sigterm_stops_them() -> None:
    service = DemoService(four_free_ports(), "--public-host", "demo")
    try:
        port = service.port
        issuer = httpx.get(f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server").json()["issuer"]
        assert issuer == f"http://localhost:{port}"
        card = httpx.get(f"http://127.0.0.1:{port + 3}/.well-known/agent-card.json").json()
        assert card["supportedInterfaces"][0]["url"] == f"http://demo:{port + 3}/a2a"
    finally:
        code, output = service.stop()
    assert code == 0
    assert f"deploy http://demo:{port + 1}/mcp" in output


def test_the_demo_servers_on_a_taken_port_exit_2_saying_so() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*COMMAND, "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ")


@pytest.mark.parametrize("host", ["http://demo", "demo:9101", ""])
def test_demo_servers_host_is_a_bare_host_name(host: str) -> None:
    with pytest.raises(ConfigError, match=r"^demo\.servers_host: "):
        parse_config({"demo": {"enabled": True, "servers_host": host}})
