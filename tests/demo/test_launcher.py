"""start_demo and the standalone `python -m` entry points."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import pytest

from elicithub.config import parse_config
from elicithub.demo.launcher import start_demo
from tests.conftest import free_port, wait_for_port

pytestmark = pytest.mark.anyio


async def test_demo_servers_form_a_valid_hub_config_and_stop_on_exit() -> None:
    async with start_demo() as demo:
        config = parse_config({"mcp_servers": demo.mcp_servers()})
        async with httpx.AsyncClient() as http:
            metadata = await http.get(f"{demo.tracker_issuer}/.well-known/oauth-authorization-server")

    assert metadata.json()["issuer"] == demo.tracker_issuer
    assert [(s.id, s.url, s.credential_scope, s.protocol) for s in config.mcp_servers] == [
        ("tracker", demo.tracker_url, "user", "auto"),
        ("deploy", demo.deploy_url, "none", "2026-07-28"),
        ("release", demo.release_url, "none", "legacy"),
    ]
    for url in (demo.tracker_url, demo.deploy_url, demo.release_url):
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient() as http:
                await http.get(url)


async def test_given_ports_are_used() -> None:
    port = free_port()

    async with start_demo(tracker_port=port) as demo:
        assert demo.tracker_url == f"http://127.0.0.1:{port}/mcp"


async def test_a_taken_port_fails_at_once() -> None:
    async with start_demo() as demo:
        taken = int(demo.deploy_url.split(":")[2].split("/")[0])
        with pytest.raises(OSError):
            async with start_demo(deploy_port=taken):
                pass


def test_tracker_and_deploy_run_standalone() -> None:
    tracker_port, deploy_port = free_port(), free_port()
    processes = [
        subprocess.Popen([sys.executable, "-m", "elicithub.demo.tracker", str(tracker_port), "--token-ttl", "5"]),
        subprocess.Popen([sys.executable, "-m", "elicithub.demo.deploy", str(deploy_port), "--server", "release"]),
    ]
    try:
        wait_for_port(tracker_port)
        wait_for_port(deploy_port)
        stats = httpx.get(f"http://127.0.0.1:{tracker_port}/debug/stats")
        unauthenticated = httpx.post(f"http://127.0.0.1:{deploy_port}/mcp", json={})
        assert stats.json() == {"unauthenticated": 0, "probes": 0, "toolCalls": {}}
        assert unauthenticated.status_code != 404
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)


def test_start_demo_runs_inside_a_plain_asyncio_loop() -> None:
    async def main() -> str:
        async with start_demo() as demo:
            return demo.release_url

    assert asyncio.run(main()).endswith("/mcp")
