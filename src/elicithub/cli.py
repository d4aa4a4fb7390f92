"""The `elicithub` command: run the hub, check a config, migrate or copy a store, test MCP servers that ask, or
chat with a hub."""

from __future__ import annotations

import importlib.util
import logging
import logging.config
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from elicithub.config import Config, ConfigError, ConversationsConfig, DemoConfig, ModelEntry, load_config
from elicithub.errors import HubError
from elicithub.runtime.approvers import named

app = typer.Typer(help="elicithub: let an agent pause a tool call, ask a person, and resume.", no_args_is_help=True)
config_app = typer.Typer(help="Work with config files.", no_args_is_help=True)
app.add_typer(config_app, name="config")
store_app = typer.Typer(help="Work with the hub's store.", no_args_is_help=True)
app.add_typer(store_app, name="store")
demo_app = typer.Typer(help="The demo.", no_args_is_help=True)
app.add_typer(demo_app, name="demo")
key_app = typer.Typer(help="The hub's master key.", no_args_is_help=True)
app.add_typer(key_app, name="key")


def _load(path: Path | None) -> Config:
    try:
        return load_config(path)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


class Loop(StrEnum):
    auto = "auto"
    asyncio = "asyncio"
    uvloop = "uvloop"


class LogFormat(StrEnum):
    text = "text"
    json = "json"


class Http(StrEnum):
    auto = "auto"
    h11 = "h11"
    httptools = "httptools"


@app.command()
def serve(
    config: Annotated[
        Path | None,
        typer.Option("--config", envvar="ELICITHUB_CONFIG", help="YAML config; embedded defaults without it."),
    ] = None,
    host: Annotated[str, typer.Option(envvar="ELICITHUB_HOST", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="ELICITHUB_PORT", help="Port to listen on.")] = 8700,
    instance: Annotated[
        str | None,
        typer.Option(
            envvar="ELICITHUB_INSTANCE",
            help="This hub's name among hubs sharing a store (default: host:port); keep it across restarts.",
        ),
    ] = None,
    loop: Annotated[
        Loop, typer.Option(help="Event loop: uvloop when installed (the `fast` extra), else asyncio.")
    ] = Loop.auto,
    http: Annotated[
        Http, typer.Option(help="HTTP parser: httptools when installed (the `fast` extra), else h11.")
    ] = Http.auto,
    log_format: Annotated[
        LogFormat,
        typer.Option(envvar="ELICITHUB_LOG_FORMAT", help="Log lines as text, or as one JSON object per line."),
    ] = LogFormat.text,
    access_log: Annotated[bool, typer.Option(help="Log a line per HTTP request.")] = True,
) -> None:
    """Run the hub. On SIGTERM it turns not-ready, serves `server.drain_s` more seconds, ends its streams, exits 0."""
    import socket

    import uvicorn

    from elicithub.server.app import HubServer, create_app
    from elicithub.server.hub import Hub
    from elicithub.server.logs import log_config

    for wanted, module in ((loop.value, "uvloop"), (http.value, "httptools")):
        if wanted == module and importlib.util.find_spec(module) is None:
            typer.echo(
                f"error: {module} is not installed; install the fast extra: pip install 'elicithub[fast]'", err=True
            )
            raise typer.Exit(2)
    loaded = _load(config)
    logging.config.dictConfig(log_config(log_format.value))
    say = logging.getLogger("elicithub.serve").info
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    address = f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"
    if "public_url" not in loaded.model_fields_set:
        # Links in url-mode questions point back at this hub: by default, where it listens.
        loaded = loaded.model_copy(update={"public_url": address})
    _check_store(loaded)
    say("elicithub listening on %s  (store %s, model %s)", address, loaded.store.shown_url, _model_name(loaded))
    if loaded.demo.enabled:
        say("Open %s/ in a browser for the demo: tracker (sign-in) and deploy/release (questions).", address)
    try:
        hub = Hub(loaded, instance=instance or f"{socket.gethostname()}:{port}")
    except HubError as exc:  # an unusable key or store: say so, without a traceback
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    # Open chat streams must not hold a shutdown: HubServer ends them after the drain, the grace period bounds the
    # rest (their runs are on record and resume on another hub or after a restart).
    served = uvicorn.Config(
        create_app(loaded, hub),
        host=host,
        port=port,
        log_level="info",
        log_config=log_config(log_format.value),
        access_log=access_log,
        timeout_graceful_shutdown=5,
        loop=loop.value,
        http=http.value,
        # uvicorn takes X-Forwarded-For and -Proto (for its access log, and the request's scheme) from the proxies
        # the hub trusts, and from no one else: the hub reads the client's address the same way (server/addresses.py).
        forwarded_allow_ips=loaded.server.trusted_proxies,
    )
    HubServer(served, hub, drain_s=loaded.server.drain_s).run()


@app.command("test")
def test_suites(
    suites: Annotated[list[Path], typer.Argument(help="YAML suites (*.elicit.yaml).")],
    record: Annotated[Path | None, typer.Option(help="Write one cassette per test under this folder.")] = None,
    replay: Annotated[
        Path | None, typer.Option(help="Run from the cassettes under this folder, with no server.")
    ] = None,
    interactive: Annotated[
        bool, typer.Option(help="Ask at the terminal when no fixture answers a question (only on a TTY).")
    ] = False,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    k: Annotated[str | None, typer.Option("-k", help="Only tests whose name contains this text.")] = None,
) -> None:
    """Run tool tests against MCP servers, answering their questions from fixtures."""
    from elicithub.testing.command import Request, run

    request = Request(suites, record=record, replay=replay, interactive=interactive, junit=junit, pattern=k)
    raise typer.Exit(run(request, say=typer.echo))


@app.command()
def chat(
    url: Annotated[str, typer.Option(help="The hub.")] = "http://127.0.0.1:8700",
    token: Annotated[str | None, typer.Option(envvar="ELICITHUB_TOKEN", help="Your bearer token.")] = None,
    conversation: Annotated[str | None, typer.Option(help="Continue this conversation.")] = None,
) -> None:
    """Chat with a hub in the terminal; its questions are asked here."""
    import anyio

    from elicithub.clients.terminal import chat as run_chat

    anyio.run(run_chat, url, token, conversation)


@app.command()
def login(
    client_id: Annotated[
        str,
        typer.Option(help="Your provider's client for the CLI: public, redirect URI http://127.0.0.1:PORT/callback."),
    ],
    url: Annotated[str, typer.Option(help="The hub.")] = "http://127.0.0.1:8700",
    port: Annotated[int, typer.Option(help="The loopback port of the redirect URI (0: any free one).")] = 0,
) -> None:
    """Sign in at the hub's identity provider in the browser; prints an access token for $ELICITHUB_TOKEN."""
    import anyio

    from elicithub.clients.login import LoginFailed
    from elicithub.clients.login import login as run_login

    try:
        token = anyio.run(lambda: run_login(url, client_id, lambda text: typer.echo(text, err=True), port=port))
    except LoginFailed as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(token)


@config_app.command("check")
def check(path: Annotated[Path, typer.Argument(help="The YAML config to validate.")]) -> None:
    """Validate a config and print what it found."""
    loaded = _load(path)
    typer.echo(f"{path}: ok")
    typer.echo(f"  public_url  {loaded.public_url}")
    typer.echo(f"  store       {loaded.store.shown_url}")
    typer.echo(f"  model       {_model_name(loaded)}")
    for entry in loaded.models:
        typer.echo(f"  models      {entry.id}: {entry.provider} {entry.model}")
    for hub_agent in loaded.agents:
        model = loaded.model_of(hub_agent)
        name = model.id if isinstance(model, ModelEntry) else model.kind
        typer.echo(f"  agent       {hub_agent.id}: model {name}, at most {hub_agent.max_steps} steps")
    typer.echo(f"  users       {', '.join(u.id for u in loaded.users) or '(none)'}")
    oidc = loaded.auth.oidc
    if oidc is not None:
        typer.echo(f"  identity    JWTs from {oidc.issuer} for audience {oidc.audience}, user = {oidc.user_claim}")
    if not loaded.auth.anonymous:
        typer.echo("  anonymous   off: chat needs a user")
    admins = [*loaded.admins]
    if oidc is not None and oidc.admin_group is not None:
        admins.append(f"members of {oidc.admin_group} (claim {oidc.groups_claim})")
    if admins:
        typer.echo(f"  admins      {', '.join(admins)}")
    typer.echo(
        f"  elicitation timeout {loaded.elicitation.timeout_s:g} s, at most {loaded.elicitation.max_rounds} rounds"
    )
    for server in loaded.mcp_servers:
        where = server.url or " ".join(server.command or [])
        typer.echo(
            f"  mcp server  {server.id}: {where} (credentials: {server.credential_scope}, protocol: {server.protocol})"
        )
        if server.credential_scope == "user" and not server.tools:
            typer.echo(
                f"              {server.id} has no tools: list; unless it lists them without a token, "
                "the first person to chat connects their account before the model sees its tools"
            )
    if loaded.slack is not None:
        slack = loaded.slack
        typer.echo(
            f"  slack       POST /slack/events, agent {slack.agent}, mapped Slack users: {len(slack.users)}, "
            f"secrets from ${slack.bot_token_env} and ${slack.signing_secret_env}"
        )
    if loaded.teams is not None:
        teams = loaded.teams
        typer.echo(
            f"  teams       POST /teams/api/messages, agent {teams.agent}, mapped Teams users: {len(teams.users)}, "
            f"secrets from ${teams.app_id_env} and ${teams.app_password_env}"
        )
    if loaded.email is not None:
        email, smtp = loaded.email, loaded.email.smtp
        login = f", login from ${smtp.username_env} and ${smtp.password_env}" if smtp.username_env else ""
        questions = f", own questions after {email.notify_after_s:g} s" if email.questions else ""
        typer.echo(
            f"  email       from {email.sender} through {smtp.host}:{smtp.port_or_default} ({smtp.tls}{login}), "
            f"addresses: {len(email.users)}{questions}"
        )
    for agent in loaded.a2a_agents:
        typer.echo(f"  a2a agent   {agent.id}: {agent.url} (credentials: {agent.credential_scope})")
    for policy in loaded.approvals:
        who = "the requester" if policy.approvers == "requester" else named(policy.approvers.people())
        timeout = policy.timeout_s or loaded.elicitation.timeout_s
        typer.echo(
            f"  approval    {', '.join(policy.tools)} by {who} (timeout {timeout:g} s, on_timeout {policy.on_timeout})"
        )


@store_app.command("migrate")
def migrate(
    config: Annotated[Path | None, typer.Option("--config", help="YAML config; embedded defaults without it.")] = None,
) -> None:
    """Apply the store's pending schema steps (Postgres; a hub also applies them when it starts)."""
    import anyio

    from elicithub.store import configured_backend
    from elicithub.store.postgres import PostgresBackend

    loaded = _load(config)

    async def run() -> None:
        backend = configured_backend(loaded)
        try:
            if not isinstance(backend, PostgresBackend):
                typer.echo(f"{loaded.store.shown_url}: this store has no schema steps; nothing to do")
                return
            applied, version = await backend.migrate()
        finally:
            await backend.close()
        done = f"applied steps {', '.join(map(str, applied))}" if applied else "nothing to apply"
        typer.echo(f"{loaded.store.shown_url}: {done}; the schema is at version {version}")

    try:
        anyio.run(run)
    except HubError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@store_app.command("copy")
def copy(
    source: Annotated[str, typer.Option("--from", help="The store to copy (sqlite:///PATH, redis://, postgresql://).")],
    target: Annotated[str, typer.Option("--to", help="The store to copy into, which must be empty.")],
    retention_s: Annotated[
        float, typer.Option(help="A Redis target keeps idle conversations this long: your conversations.retention_s.")
    ] = ConversationsConfig().retention_s,
) -> None:
    """Copy everything a store holds into an empty one, every hub stopped: to move from SQLite to Postgres or Redis."""
    from elicithub.store.command import copy_with_progress, summary

    try:
        counts = copy_with_progress(source, target, retention_s)
    except HubError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(summary(source, target, counts))


@key_app.command("init")
def key_init(
    config: Annotated[
        Path | None,
        typer.Option("--config", envvar="ELICITHUB_CONFIG", help="YAML config; embedded defaults without it."),
    ] = None,
) -> None:
    """Make the master key file the config names unless a key is given (its variable set, or the file there); check
    the key either way. Compose runs it once before the hubs start, so that they share one key."""
    import os

    from elicithub.auth.keys import load_keys

    secrets = _load(config).secrets
    if os.environ.get(secrets.key_env):
        where = f"from ${secrets.key_env}"
    else:
        where = f"{'in' if Path(secrets.key_file).exists() else 'made in'} {secrets.key_file}"
    try:
        load_keys(secrets)
    except HubError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:  # e.g. a volume the hub's user may not write
        typer.echo(f"error: {exc.filename}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"master key: {where}")


@demo_app.command("servers")
def demo_servers(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="The tracker's port; deploy, release and travel listen on the next three.")
    ] = DemoConfig().servers_port,
    public_host: Annotated[
        str | None,
        typer.Option(help="The name hubs reach these servers by (default: --host, or loopback), e.g. a service name."),
    ] = None,
) -> None:
    """Run only the demo's MCP servers and A2A agent, for hubs whose config says `demo.servers_host`."""
    import asyncio
    import signal

    from elicithub.demo.launcher import service_ports, start_demo

    tracker, deploy, release, travel = service_ports(port)
    if public_host is None and host in ("0.0.0.0", "::", ""):
        public_host = "127.0.0.1"

    async def run() -> None:
        # As a container's first process a signal without a handler is ignored: stop on SIGTERM too.
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        async with start_demo(
            host,
            tracker_port=tracker,
            deploy_port=deploy,
            release_port=release,
            travel_port=travel,
            public_host=public_host,
        ) as demo:
            typer.echo(
                f"demo servers: tracker {demo.tracker_url}, deploy {demo.deploy_url}, release {demo.release_url}, "
                f"travel {demo.travel_url}"
            )
            await stop.wait()

    try:
        asyncio.run(run())
    except OSError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _check_store(config: Config) -> None:
    """Refuse to serve, with the reason and no traceback, a store this hub must not use (an unreachable or newer
    Postgres, a Redis that may evict keys). The hub checks again when it starts, on its own event loop."""
    import anyio

    from elicithub.store import configured_backend

    async def check() -> None:
        backend = configured_backend(config)
        try:
            await backend.open()
        finally:
            await backend.close()

    try:
        anyio.run(check)
    except HubError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _model_name(config: Config) -> str:
    """The default model as `serve` and `config check` name it."""
    model = config.default_model()
    if isinstance(model, ModelEntry):
        return f"{model.id} ({model.provider} {model.model})"
    return model.kind + (f" ({model.model})" if model.model else "")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
