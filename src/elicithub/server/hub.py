"""The Hub: one process's wiring of backend, broker, run stream, model, triggers and conversations."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

from starlette.requests import Request

from elicithub import telemetry
from elicithub.auth.addresses import SignedInAddresses
from elicithub.auth.groups import SignedInGroups
from elicithub.auth.keys import Keys, load_keys
from elicithub.auth.links import LinkSigner, LinkTickets
from elicithub.auth.oauth import OAuthClient
from elicithub.auth.sessions import ProviderSessions, widget_client
from elicithub.auth.vault import Vault
from elicithub.config import SESSION_S, Config
from elicithub.core.broker import Broker
from elicithub.core.elicitation import new_id
from elicithub.core.ports import Backend
from elicithub.metrics import Metrics
from elicithub.runtime.admin import AdminQuestions
from elicithub.runtime.approvers import Answerable, ApprovalNotices
from elicithub.runtime.audit import AuditLog
from elicithub.runtime.conversations import Conversations
from elicithub.runtime.inbox import Inbox, InboxSink
from elicithub.runtime.limits import Limits
from elicithub.runtime.live import LiveTurns
from elicithub.runtime.loop import AgentSetup, Runner
from elicithub.runtime.models import Model, create_model
from elicithub.runtime.router import ToolRouter, Trigger
from elicithub.runtime.stream import RunStream
from elicithub.server.addresses import ClientAddress
from elicithub.server.admins import Admins
from elicithub.server.demo import HubDemo
from elicithub.server.dev_sign_in import DevSignIn
from elicithub.server.identity import Identity
from elicithub.server.resource_metadata import ProtectedResource
from elicithub.server.surfaces import a2a_surface, agui_surface, mcp_surface
from elicithub.store import configured_backend
from elicithub.store.casts import CastFanOut
from elicithub.surfaces import Surface
from elicithub.surfaces.audit import AuditPages
from elicithub.surfaces.mcp.list_changed import ToolListChanges
from elicithub.surfaces.pages.admin import AdminPages
from elicithub.surfaces.pages.connect import SignInPages
from elicithub.surfaces.pages.inbox import InboxPages
from elicithub.surfaces.pages.sign_in import ProviderSignIn
from elicithub.surfaces.streaming import OpenStreams
from elicithub.triggers.a2a import A2aShared, a2a_client, a2a_triggers
from elicithub.triggers.approval_ends import ApprovalEnds
from elicithub.triggers.approval_timers import ApprovalTimers
from elicithub.triggers.approvals import ApprovalGate
from elicithub.triggers.credentials import CredentialGate
from elicithub.triggers.delegate import DelegateTrigger
from elicithub.triggers.mcp import McpShared, downstream_client, mcp_triggers

if TYPE_CHECKING:
    from elicithub.auth.oidc import OidcVerifier
    from elicithub.surfaces.email import EmailSurface
    from elicithub.surfaces.slack import SlackSurface
    from elicithub.surfaces.teams import TeamsSurface

log = logging.getLogger(__name__)


class Hub:
    """`instance` names this hub among those sharing a store: stable across restarts (`--instance`,
    `$ELICITHUB_INSTANCE`, else host and port), so a restarted hub takes its own runs back at once."""

    def __init__(
        self,
        config: Config,
        *,
        backend: Backend | None = None,
        model: Model | None = None,
        keys: Keys | None = None,
        instance: str | None = None,
    ) -> None:
        telemetry.configure()  # on only if the OTEL_* environment asks for it
        self._demo = HubDemo()
        if config.demo.enabled:
            config = self._demo.configure(config)
        self.config = config
        self.instance = instance or os.environ.get("ELICITHUB_INSTANCE") or new_id("hub")
        self.keys = keys if keys is not None else load_keys(config.secrets)
        self.backend = backend or configured_backend(config)
        self.store = self.backend.elicitations
        self.metrics = Metrics(config.metrics.enabled)
        casts = CastFanOut(self.backend.casts)
        self.live = LiveTurns(casts, self.backend.kv, self.instance, self.backend.shared)
        """Model turns as they stream, to this hub's readers and other hubs'."""
        self.tool_changes = ToolListChanges(casts)
        """Who hears, on every hub, that a person's tools changed (their `/mcp` sessions)."""
        self.stream = RunStream(self.backend.events, self.live)
        # A durable store keeps questions open across a shutdown, and the runs waiting on them resume after it.
        self.inbox = Inbox(self.backend.events, self.store)
        """Every person's inbox: the questions shown and ended, on whichever hub, on one shared log."""
        self.sink = InboxSink(self.stream, self.inbox)
        """Where questions shown and ended go: their run's stream, the inbox, and surfaces that hear them."""
        self.limits = Limits(config.limits, self.backend.kv, self.metrics.limited)
        """What each caller may start, and how many runs this hub holds before it sheds new ones."""
        self.broker = Broker(
            self.store, self.limits.questions(self.sink), durable=self.backend.durable, counts=self.metrics
        )
        self.model = model if model is not None else create_model(config.default_model(), self.metrics)
        self.agent_setups = self._agent_setups(model)
        self.streams = OpenStreams()
        """The chat streams being written; a shutdown ends them at once."""
        self._build_credentials()
        self._build_runs(self._build_approvals())
        self._build_identity()
        self._build_pages()
        self._build_surfaces()
        self._sweeper: asyncio.Task[None] | None = None
        self.draining = False
        """Told to stop (SIGTERM): not ready for new traffic, still serving what comes for `server.drain_s`."""

    def _agent_setups(self, given: Model | None) -> dict[str, AgentSetup]:
        """Each agent's model (None: the default; one object per `models:` entry, shared by the agents on it; a
        model given to the hub runs every agent), instructions and turns per run."""
        config = self.config
        made: dict[str, Model] = {}
        setups = {}
        for agent in config.agents:
            model = None
            if given is None and agent.model is not None and agent.model != config.model:
                entry = config.model_of(agent)
                model = made.get(agent.model) or made.setdefault(agent.model, create_model(entry, self.metrics))
            setups[agent.id] = AgentSetup(model, agent.instructions, agent.max_steps)
        return setups

    def _build_credentials(self) -> None:
        """What the hub keeps of people's credentials and sign-ins: the vault, signed links, the OAuth client."""
        config, oidc = self.config, self.config.auth.oidc
        self.vault = Vault(self.backend.kv, self.keys)
        self.links = LinkSigner(self.keys)
        self.link_tickets = LinkTickets(self.backend.kv)
        self.oauth = OAuthClient(self.vault, config.public_url)
        # Kept as long as the sessions their sign-ins start; the verified addresses only when mail is sent.
        kv, keep_s = self.backend.kv, oidc.session_s if oidc is not None else SESSION_S
        self.signed_in_groups = SignedInGroups(kv, keep_s)
        self.signed_in_addresses = SignedInAddresses(kv, keep_s) if oidc and config.email else None

    def _build_approvals(self) -> ApprovalGate:
        """Approvals: who hears of them, their timers, ends and audit log; the gate that wraps the triggers."""
        config, oidc = self.config, self.config.auth.oidc
        self.approval_notices = ApprovalNotices()
        """Where the surfaces that reach approvers hear of approvals (runtime/approvers.py)."""
        self.approval_notices.register(self.inbox)
        self.audit = AuditLog(self.backend.kv, config.audit.retention_s)
        self.approval_timers = ApprovalTimers(self.backend.kv, self.store, self.approval_notices)
        self.approval_ends = ApprovalEnds(
            self.backend.kv, self.store, self.audit, self.approval_notices, config.conversations.ended_retention_s
        )
        return ApprovalGate(
            config.approvals,
            config.elicitation.timeout_s,
            self.backend.kv,
            self.approval_notices,
            self.approval_ends,
            self.approval_timers,
            config.groups,
            self.signed_in_groups if oidc is not None else None,
        )

    def _build_runs(self, approvals: ApprovalGate) -> None:
        """The triggers (MCP servers, A2A agents, delegations) behind the tool router, the runner, and
        `Conversations`, the one door every surface goes through."""
        config = self.config
        gate = CredentialGate(
            self.vault, self.oauth, self.broker, self.links, config.public_url, config.elicitation.timeout_s
        )
        self.http = downstream_client(config.elicitation.timeout_s)
        shared = McpShared(
            self.broker,
            self.http,
            config.elicitation.timeout_s,
            config.elicitation.max_rounds,
            self.model,
            gate,
            self.backend.kv,
        )
        triggers: list[Trigger] = [*mcp_triggers(config.mcp_servers, shared)]
        self.a2a_http = a2a_client() if config.a2a_agents else None
        """The A2A agents' pooled client, when any are configured."""
        if self.a2a_http is not None:
            timeout_s, max_rounds = config.elicitation.timeout_s, config.elicitation.max_rounds
            a2a = A2aShared(self.broker, self.a2a_http, timeout_s, max_rounds, gate)
            triggers.extend(a2a_triggers(config.a2a_agents, a2a))
        triggers.extend(DelegateTrigger(agent, self.backend.runs) for agent in config.agents)
        self.tools = ToolRouter([approvals.wrap(t) for t in triggers], {a.id: a.tools for a in config.agents})
        runner = Runner(
            self.model,
            self.tools,
            self.broker,
            self.stream,
            self.backend.runs,
            self.backend.conversations,
            self.agent_setups,
            self.limits.release,
        )
        self.conversations = Conversations(
            self.backend, self.broker, runner, self.stream, self.instance, groups=config.groups, limits=self.limits
        )
        self.answerable = Answerable(self.broker, config.groups)
        """Which open questions a person can answer (their own, and approvals routed to them)."""
        self.metrics.count_runs(self.conversations.running)

    def _build_identity(self) -> None:
        """Who a request is: users' tokens, the OpenID provider's tokens and the widget's sessions at it."""
        config, oidc = self.config, self.config.auth.oidc
        self.client_address = ClientAddress(config.server.trusted_proxies)
        """Where a request comes from (behind the proxies the config trusts): the limits count anonymous callers so."""
        self.resource = ProtectedResource(config.public_url, config.auth.oidc)
        self.oidc: OidcVerifier | None = None
        if oidc is not None:
            from elicithub.auth.oidc import OidcVerifier  # joserfc and httpx: only with a provider

            self.oidc = OidcVerifier(oidc, self.resource.audiences)
        self.oidc_client_secret = (
            os.environ.get(oidc.client_secret_env) if oidc is not None and oidc.client_secret_env else None
        )
        """The widget's client secret at the provider (None: a public client)."""
        self.provider_sessions = (
            ProviderSessions(
                self.vault,
                self.oidc,
                partial(widget_client, oidc, config.public_url, self.oidc_client_secret),
                oidc.session_s,
            )
            if oidc is not None and self.oidc is not None
            else None
        )
        """The widget sessions of people signed in at the provider."""
        self.identity = Identity(
            config.users,
            self.keys.derive("session"),
            config.public_url,
            self.resource,
            self.oidc,
            self.provider_sessions,
            oidc.session_s if oidc is not None else SESSION_S,
        )
        self.provider_sign_in = ProviderSignIn(
            config.public_url,
            oidc,
            self.oidc,
            self.identity,
            self.keys.derive("oidc-sign-in"),
            self.oidc_client_secret,
            self.signed_in_groups,
            self.signed_in_addresses,
        )

    def _build_pages(self) -> None:
        """The pages the hub hosts: admin, audit, inbox, and the sign-in a url-mode question links to."""
        config, oidc = self.config, self.config.auth.oidc
        admins = Admins(config.admins, oidc.admin_group if oidc else None, self.identity, self.signed_in_groups)
        self.dev_sign_in = DevSignIn(config, self.identity)
        """What every page the hub serves does for a browser: the demo signs it in as its dev user."""
        self.admin_pages = AdminPages(AdminQuestions(self.broker, self.backend.runs), admins, self.dev_sign_in)
        self.audit_pages = AuditPages(self.audit, admins)
        self.inbox_pages = InboxPages(
            self.inbox,
            self.answerable,
            self.identity,
            self.groups_of,
            self.streams,
            config.streams.keepalive_s,
            self.dev_sign_in,
        )
        self.sign_in_pages = SignInPages(
            config,
            self.conversations,
            self.identity,
            self.oauth,
            self.vault,
            self.links,
            self.link_tickets,
            self.tool_changes.changed,
        )

    def _build_surfaces(self) -> None:
        """The surfaces that serve a protocol of their own (MCP, A2A, AG-UI; Slack, Teams and email when configured)."""
        config, oidc = self.config, self.config.auth.oidc
        # Built by their first requests (server/surfaces.py).
        self.mcp = mcp_surface(self)
        self.a2a = a2a_surface(self)
        # Optional surfaces: the app mounts the routes of those configured.
        self.slack: SlackSurface | None = None
        if config.slack is not None:
            from elicithub.surfaces.slack import SlackSurface  # slow to import (Bolt, aiohttp): only when configured

            self.slack = SlackSurface(
                config.slack,
                self.conversations,
                self.backend.kv,
                self.links,
                config.public_url,
                {s.id: s.display_name for s in config.mcp_servers},
                config.conversations.retention_s + config.elicitation.timeout_s,
                config.groups,
                self.signed_in_groups.of if oidc is not None else None,
                self.metrics.notification,
            )
            self.approval_notices.register(self.slack.approvals)
        self.teams: TeamsSurface | None = None
        if config.teams is not None:
            from elicithub.surfaces.teams import TeamsSurface  # slow to import (the Teams SDK): only when configured

            self.teams = TeamsSurface(
                config.teams,
                self.conversations,
                self.backend.kv,
                self.links,
                config.public_url,
                {s.id: s.display_name for s in config.mcp_servers},
                config.conversations.retention_s + config.elicitation.timeout_s,
                config.groups,
                self.signed_in_groups.of if oidc is not None else None,
                self.metrics.notification,
            )
            self.approval_notices.register(self.teams.approvals)
        self.email: EmailSurface | None = None
        if config.email is not None:
            from elicithub.surfaces.email import EmailSurface  # imports aiosmtplib: only when configured

            groups_of = self.signed_in_groups.of if oidc is not None else None
            self.email = EmailSurface(
                config.email, config.public_url, self.keys, self.backend.kv, self.store, self.conversations,
                config.groups, self.metrics.notification, groups_of, self.signed_in_addresses,
            )  # fmt: skip
            self.approval_notices.register(self.email.notices)
            if config.email.questions:
                self.sink.hear(self.email.notices.heard)
        self.agui = agui_surface(self)
        self.surfaces: list[Surface] = [
            self.mcp,
            self.a2a,
            self.agui,
            *([self.slack] if self.slack is not None else []),
            *([self.teams] if self.teams is not None else []),
            *([self.email] if self.email is not None else []),
        ]
        """The surfaces that serve a protocol of their own: the app mounts their routes and runs their lifespans."""

    async def start(self) -> None:
        await self.backend.open()
        await self.live.start()
        await self.tool_changes.start()
        await self.broker.start()
        if self.oidc is not None:
            await self.oidc.start()
        await self._demo.start()
        await self.backend.runs.heartbeat(self.instance, 3 * self.config.store.heartbeat_s)
        await self.conversations.recover()
        self._sweeper = asyncio.create_task(self._sweep())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self.slack is not None:
            await self.slack.close()
        if self.teams is not None:
            await self.teams.close()
        await self.conversations.close()
        if self.backend.shared:
            # Gone now rather than after three missed beats: another hub takes this one's runs at its next sweep.
            with contextlib.suppress(Exception):
                await self.backend.runs.heartbeat(self.instance, 0)
        await self.broker.close()
        await self.tools.close()
        await self.http.aclose()
        if self.a2a_http is not None:
            await self.a2a_http.aclose()
        if self.oidc is not None:
            await self.oidc.close()
        await self._demo.close()
        await self.backend.close()

    async def _sweep(self) -> None:
        """`sweep` every few seconds while the hub runs."""
        interval = min(5.0, self.config.elicitation.timeout_s / 2, self.config.store.heartbeat_s)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except Exception:
                log.exception("sweeping elicitations failed")

    async def groups_of(self, request: Request, user_id: str | None) -> frozenset[str]:
        """The groups the identity provider puts the person making `request` in: their bearer JWT's, or for a
        signed-in browser their latest sign-in's (none without OIDC; the hub's own `groups:` are added where asked)."""
        if user_id is None or self.oidc is None:
            return frozenset()
        groups = self.identity.bearer_groups(request)
        return groups if groups is not None else await self.signed_in_groups.of(user_id)

    async def sweep(self) -> None:
        """One pass of what the hub does every few seconds: beat, continue runs whose hub is gone, expire questions
        whose waiter is gone, and forget old finished ones and idle conversations (with what this hub holds of
        them)."""
        await self.backend.runs.heartbeat(self.instance, 3 * self.config.store.heartbeat_s)
        await self.conversations.recover()
        await self.broker.expire_due()
        await self.approval_timers.fire_due()
        await self.approval_ends.sweep()
        ended_s = self.config.conversations.ended_retention_s
        await self.broker.purge(timedelta(seconds=ended_s))
        await self.backend.runs.purge(time.time() - ended_s)
        await self.conversations.purge(time.time() - self.config.conversations.retention_s)
