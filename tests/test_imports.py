"""What a process imports: a hub imports the libraries of a store, Slack, Teams, email, telemetry or the demo only
when its config uses them, the SDKs of its protocol surfaces, downstream clients and sign-ins only when first used,
and the command's help and `config check` import no server (each import costs every start CPU)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import USERS

OPTIONAL = (
    "redis",
    "asyncpg",
    "slack_bolt",
    "slack_sdk",
    "aiohttp",
    "opentelemetry.sdk",
    "elicithub.store.redis",
    "elicithub.store.postgres",
    "elicithub.surfaces.slack",
    "microsoft_teams",
    "msal",
    "elicithub.surfaces.teams",
    "aiosmtplib",
    "elicithub.surfaces.email",
    "elicithub.demo.deploy",
    "elicithub.demo.tracker",
    "elicithub.demo.travel",
    "pydantic_ai",
    "openai",
    "anthropic",
    "google.genai",
)
"""What a hub on SQLite without Slack, Teams, email, telemetry, the demo or a provider's model does without."""

LAZY = (
    "mcp",
    "mcp_types",
    "a2a",
    "google.protobuf",
    "culsans",
    "aiologic",
    "ag_ui",
    "authlib",
    "joserfc",
    "jsonschema",
    "httpx",
    "rich",
    "pygments",
    "elicithub.surfaces.mcp.server",
    "elicithub.surfaces.a2a.agent",
    "elicithub.surfaces.chat.agui",
    "elicithub.triggers.mcp.server",
    "elicithub.triggers.a2a.agent",
    "elicithub.auth.discovery",
    "elicithub.auth.oidc",
)
"""What a hub does without until it is used, whatever its config: the MCP SDK (the MCP surface's and a downstream
server's), the A2A SDK with protobuf and its queues (culsans, aiologic), ag_ui (each surface is built by its first
request, each downstream server or agent by its first call), authlib and joserfc (a sign-in), jsonschema (an
approval), and httpx, which imports its command line's rich and pygments (a hub makes an httpx client only for A2A
agents or an identity provider)."""

MCP_SERVER = {"id": "deploy", "url": "http://127.0.0.1:1/mcp"}

PROVIDERS = ("pydantic_ai", "openai", "anthropic", "google.genai")

FOUND = 'json.dumps(sorted(m for m in sys.modules if m in {names} or m.startswith(tuple(n + "." for n in {names}))))'
"""The modules of `names` (and their submodules) this interpreter has imported, as JSON."""

REPORT = "import json, sys\n{run}\nprint(" + FOUND + ")"

HUB = """
from elicithub.config import Config
from elicithub.server.app import create_app
create_app(Config.model_validate({config}))
"""


def imported(run: str, names: tuple[str, ...], cwd: Path) -> list[str]:
    """Which of `names` (and their submodules) a fresh interpreter has imported after `run`."""
    # Telemetry stays off whatever the environment running the tests asks for.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", REPORT.format(run=run, names=repr(names))],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=True,
    )
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


def hub_imports(config: dict[str, object], cwd: Path) -> list[str]:
    return imported(HUB.format(config=repr(config)), (*OPTIONAL, *LAZY), cwd)


def test_a_sqlite_hub_imports_no_other_store_slack_teams_telemetry_or_demo(tmp_path: Path) -> None:
    assert hub_imports({"store": {"url": f"sqlite:///{tmp_path}/hub.db"}}, tmp_path) == []


def test_a_hub_with_an_mcp_server_imports_no_sdk_before_it_is_used(tmp_path: Path) -> None:
    config = {"store": {"url": f"sqlite:///{tmp_path}/hub.db"}, "mcp_servers": [MCP_SERVER]}
    assert hub_imports(config, tmp_path) == []


def test_a_hub_with_an_a2a_agent_makes_its_client_and_imports_the_a2a_sdk_at_its_first_call(tmp_path: Path) -> None:
    agent = {"id": "travel", "url": "http://127.0.0.1:1"}
    found = hub_imports({"store": {"url": "memory://"}, "a2a_agents": [agent]}, tmp_path)
    sdk = ("a2a", "google.protobuf", "culsans", "aiologic", "elicithub.triggers.a2a.agent")
    assert "httpx" in found and not [m for m in found if m.startswith(sdk)], found


def test_a_hub_with_an_identity_provider_imports_its_verifier_and_no_sign_in_client(tmp_path: Path) -> None:
    oidc = {"issuer": "https://id.example.com", "audience": "elicithub", "client_id": "widget"}
    found = set(hub_imports({"store": {"url": "memory://"}, "auth": {"oidc": oidc}}, tmp_path))
    assert {"elicithub.auth.oidc", "joserfc", "httpx"} <= found
    assert not {m for m in found if m.split(".")[0] in ("authlib", "mcp", "mcp_types", "a2a", "ag_ui")}, found


def test_a_memory_hub_imports_no_store_library_either(tmp_path: Path) -> None:
    assert hub_imports({"store": {"url": "memory://"}}, tmp_path) == []


def test_a_hub_on_redis_imports_redis_and_not_postgres(tmp_path: Path) -> None:
    found = hub_imports({"store": {"url": "redis://127.0.0.1:1/0"}}, tmp_path)
    assert {"redis", "elicithub.store.redis"} <= set(found)
    assert not {m for m in found if m.split(".")[0] == "asyncpg" or m.startswith("elicithub.store.postgres")}


def test_a_hub_on_postgres_imports_asyncpg_and_not_redis(tmp_path: Path) -> None:
    found = hub_imports({"store": {"url": "postgresql://hub@127.0.0.1:1/hub"}}, tmp_path)
    assert {"asyncpg", "elicithub.store.postgres"} <= set(found)
    assert not {m for m in found if m.split(".")[0] == "redis" or m.startswith("elicithub.store.redis")}


def test_a_hub_with_slack_configured_imports_slack(tmp_path: Path) -> None:
    run = "import os\nos.environ.update(SLACK_BOT_TOKEN='xoxb-test', SLACK_SIGNING_SECRET='secret')\n" + HUB.format(
        config=repr({"store": {"url": "memory://"}, "slack": {}})
    )
    found = imported(run, OPTIONAL, tmp_path)
    assert {"slack_bolt", "elicithub.surfaces.slack"} <= set(found)


def test_a_hub_with_teams_configured_imports_the_teams_sdk_and_not_slack(tmp_path: Path) -> None:
    teams = {"tenant_id": "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"}
    run = "import os\nos.environ.update(TEAMS_APP_ID='app', TEAMS_APP_PASSWORD='secret')\n" + HUB.format(
        config=repr({"store": {"url": "memory://"}, "teams": teams})
    )
    found = imported(run, OPTIONAL, tmp_path)
    assert {"microsoft_teams.apps", "microsoft_teams.cards", "elicithub.surfaces.teams"} <= set(found)
    assert not {m for m in found if m.startswith(("slack_bolt", "slack_sdk", "elicithub.surfaces.slack"))}


def test_importing_the_teams_sdk_leaves_the_environment_as_it_was(tmp_path: Path) -> None:
    """The SDK loads a `.env` file of the working directory when imported: none of it may reach the hub's process
    (a `CLIENT_SECRET` there would switch the SDK to a secret the hub's config never named)."""
    (tmp_path / ".env").write_text("CLIENT_SECRET=from-a-dotenv\nELICITHUB_TEST_DOTENV=leaked\n")
    run = "import os\nos.environ.update(TEAMS_APP_ID='app', TEAMS_APP_PASSWORD='secret')\n" + HUB.format(
        config=repr({"store": {"url": "memory://"}, "teams": {"tenant_id": "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"}})
    )
    check = run + "\nassert 'microsoft_teams.apps' in sys.modules\nprint(json.dumps([os.environ.get(n) for n in "
    check += "('CLIENT_SECRET', 'ELICITHUB_TEST_DOTENV')]))\n"
    env = {k: v for k, v in os.environ.items() if k not in ("CLIENT_SECRET", "ELICITHUB_TEST_DOTENV")}
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys\n" + check], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [None, None]


def test_a_hub_with_email_configured_imports_the_smtp_client(tmp_path: Path) -> None:
    email = {"smtp": {"host": "127.0.0.1", "tls": "none"}, "from": "agents@acme.test"}
    found = hub_imports({"store": {"url": "memory://"}, "email": email}, tmp_path)
    assert {"aiosmtplib", "elicithub.surfaces.email"} <= set(found)
    assert not {m for m in found if m.startswith(("slack", "elicithub.surfaces.slack"))}


CLI = """
from elicithub.cli import main
sys.argv = ["elicithub", *{args}]
try:
    main()
except SystemExit:
    pass
"""


def test_help_and_config_check_import_no_server(tmp_path: Path) -> None:
    config = tmp_path / "hub.yaml"
    config.write_text("store: {url: 'memory://'}\n")
    servers = ("elicithub.server", "fastapi", "uvicorn", *OPTIONAL)
    for args in (["--help"], ["config", "check", str(config)]):
        assert imported(CLI.format(args=args), servers, tmp_path) == [], args


def model_config(provider: str) -> dict[str, object]:
    model = {"id": "m", "provider": provider, "model": "x", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "K"}
    return {"store": {"url": "memory://"}, "models": [model], "model": "m"}


def test_a_hub_on_a_providers_model_imports_no_provider_sdk_before_its_first_request(tmp_path: Path) -> None:
    for provider in ("openai", "anthropic", "google"):
        assert hub_imports(model_config(provider), tmp_path) == [], provider


ROOTS = {"openai": "openai", "anthropic": "anthropic", "google": "google.genai"}


@pytest.mark.parametrize("provider", sorted(ROOTS))
def test_a_models_request_imports_its_own_providers_sdk_and_no_other(provider: str, tmp_path: Path) -> None:
    build = """
import os
os.environ["K"] = "sk-test"
from elicithub.config import Config
from elicithub.runtime.models import providers
config = Config.model_validate({config})
providers.build(config.models[0])
"""
    root = ROOTS[provider]
    found = set(imported(build.format(config=repr(model_config(provider))), PROVIDERS, tmp_path))
    assert "pydantic_ai" in found and root in found
    others = set(ROOTS.values()) - {root}
    assert not {m for m in found for other in others if m == other or m.startswith(other + ".")}


SERVED = """
import os, threading, urllib.request
from elicithub.cli import main


def report_once_ready():
    try:
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:{port}/readyz", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            threading.Event().wait(0.05)
        print({found}, flush=True)
    finally:
        os._exit(0)


threading.Thread(target=report_once_ready, daemon=True).start()
sys.argv = ["elicithub", "serve", "--config", "hub.yaml", "--port", "{port}"]
main()
"""
"""`elicithub serve` in this interpreter, reporting what it imported once `/readyz` is 200 (whatever happens, the
report ends the process; a hub that cannot start ends it with no report)."""


def test_elicithub_serve_is_ready_without_the_sdks_a_hub_imports_when_used(tmp_path: Path) -> None:
    """The whole `serve` path (the command line, uvicorn, the hub's start), on issue 45's config: SQLite and one MCP
    server. It exits when the process reports, whatever it found (a hub that cannot start prints nothing)."""
    config = {"store": {"url": f"sqlite:///{tmp_path}/hub.db"}, "mcp_servers": [MCP_SERVER]}
    (tmp_path / "hub.yaml").write_text(json.dumps(config))  # JSON is YAML
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    names = (*OPTIONAL, *LAZY)
    run = SERVED.replace("{port}", str(port)).replace("{found}", FOUND.replace("{names}", repr(names)))
    assert imported(run, names, tmp_path) == []


FIRST_REQUESTS = """
import asyncio, json, sys
import httpx2
from elicithub.config import Config
from elicithub.server.app import create_app

INITIALIZE = {{
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {{"protocolVersion": "2025-11-25", "capabilities": {{}}, "clientInfo": {{"name": "t", "version": "1"}}}},
}}
MCP = {{"authorization": "Bearer alice-secret", "accept": "application/json, text/event-stream"}}
STEPS = [
    ("mcp", "POST", "/mcp", {{"json": INITIALIZE, "headers": MCP}}),
    ("a2a", "GET", "/.well-known/agent-card.json", {{}}),
    ("ag_ui", "POST", "/run/agui", {{"json": {{}}}}),
]


def loaded(root):
    return any(m == root or m.startswith(root + ".") for m in sys.modules)


async def main():
    app = create_app(Config.model_validate({config}))
    seen = {{}}
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8700") as hub:
            for sdk, method, path, options in STEPS:
                before = loaded(sdk)
                response = await hub.request(method, path, **options)
                seen[sdk] = [before, response.status_code, loaded(sdk)]
            seen["openapi"] = sorted((await hub.get("/openapi.json")).json()["paths"])
    print(json.dumps(seen))


asyncio.run(main())
"""


def test_each_surface_is_built_by_its_first_request_which_it_answers(tmp_path: Path) -> None:
    """The MCP server's `initialize`, the A2A agent card and AG-UI's 401 to a caller without a token, each on a hub
    that had not imported its SDK yet; /openapi.json still documents AG-UI's routes."""
    config = {"store": {"url": "memory://"}, "users": USERS}
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    run = FIRST_REQUESTS.format(config=repr(config))
    done = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["mcp"] == [False, 200, True]
    assert seen["a2a"] == [False, 200, True]
    assert seen["ag_ui"] == [False, 401, True]
    assert {"/run/agui", "/run/agui/{agent}"} <= set(seen["openapi"])
