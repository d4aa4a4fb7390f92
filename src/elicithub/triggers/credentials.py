"""User-scoped credentials: find the caller's token before a call, refresh it, or ask them to connect (url mode)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import replace
from urllib.parse import urlencode

from elicithub.auth.links import LinkSigner
from elicithub.auth.oauth import OAuthClient, OAuthProblem
from elicithub.auth.vault import Credential, Vault
from elicithub.config import ServiceConfig
from elicithub.core.broker import Broker
from elicithub.core.elicitation import QuestionContext, new_elicitation
from elicithub.errors import HubError
from elicithub.runtime.tools import CallContext

log = logging.getLogger(__name__)

REFRESH_MARGIN_S = 60.0
"""Refresh a token this long before it expires, so a call never starts with one about to lapse."""

NOT_PROVIDED = "Authentication required but not provided."


class CredentialRefused(HubError):
    """No credential, and none coming: the message is the tool error the model sees."""


def needs_connection(server: ServiceConfig, tool: str, context: CallContext) -> str:
    needs = (
        f"Tool {server.id}.{tool} requires user authentication. The user needs to connect their "
        f"{server.display_name} account before this tool can be used."
    )
    if context.surface == "mcp" and context.user_id is not None:
        return f"{needs} This MCP client did not declare the elicitation capability (url mode), so the hub cannot ask."
    return needs


class CredentialGate:
    """Before each call to a server: the Authorization header to send, or a url-mode question that gets one."""

    def __init__(
        self, vault: Vault, oauth: OAuthClient, broker: Broker, links: LinkSigner, public_url: str, timeout_s: float
    ) -> None:
        self.vault = vault
        self.oauth = oauth
        self.broker = broker
        self.links = links
        self.public_url = public_url.rstrip("/")
        self.timeout_s = timeout_s
        self._refreshing: dict[tuple[str, str], asyncio.Lock] = {}

    async def authorization(
        self,
        server: ServiceConfig,
        tool: str,
        context: CallContext,
        *,
        reconnect: bool = False,
        step_up: str | None = None,
    ) -> str | None:
        """The header value for this call; raises CredentialRefused. `reconnect`: the stored token was rejected;
        `step_up`: it lacks this scope, so the person signs in again for it (keeping the old token until then)."""
        if server.credential_scope == "none":
            return None
        if server.credential_scope == "project":
            assert server.credential_env is not None
            token = os.environ.get(server.credential_env)
            if not token:
                raise CredentialRefused(
                    f"The hub has no credential for {server.display_name}: set ${server.credential_env}."
                )
            return f"Bearer {token}"
        if not context.can_show("url") or context.user_id is None:
            raise CredentialRefused(needs_connection(server, tool, context))
        user_id = context.user_id
        if step_up is not None:
            from mcp.client.auth.utils import union_scopes  # the SDK's, imported by a step-up, not at start

            current = await self.vault.credential(server.id, user_id)
            scope = union_scopes(current.scope if current is not None else None, step_up)
            wider = await self._connect(server, tool, context, user_id, scope=scope)
            return f"Bearer {wider.access_token}"
        if reconnect:
            await self.vault.forget_credential(server.id, user_id)
        credential = await self.usable(server, user_id)
        if credential is None:
            # A first sign-in comes before the call goes downstream: run again once it is answered, the call finds
            # the token, so the run may park meanwhile. A reconnect or a step-up is a step of the call's own retries,
            # which a rerun would not repeat the same way.
            credential = await self._connect(server, tool, context, user_id, resumable=not reconnect)
        return f"Bearer {credential.access_token}"

    async def usable(self, server: ServiceConfig, user_id: str) -> Credential | None:
        """The stored credential, refreshed first when it is about to expire; None when there is none that works."""
        credential = await self.vault.credential(server.id, user_id)
        if credential is None or not _expiring(credential):
            return credential
        lock = self._refreshing.setdefault((server.id, user_id), asyncio.Lock())
        async with lock:
            credential = await self.vault.credential(server.id, user_id)  # another call may have refreshed it
            if credential is None or not _expiring(credential):
                return credential
            if credential.refresh_token is None:
                await self.vault.forget_credential(server.id, user_id)
                return None
            try:
                refreshed = await self.oauth.refresh(server, credential)
            except OAuthProblem as exc:
                log.info("refreshing the %s token failed (%s); asking the user to connect again", server.id, exc)
                await self.vault.forget_credential(server.id, user_id)
                return None
            await self.vault.save_credential(server.id, user_id, refreshed)
            log.info("refreshed the %s token", server.id)
            return refreshed

    async def _connect(
        self,
        server: ServiceConfig,
        tool: str,
        context: CallContext,
        user_id: str,
        *,
        scope: str | None = None,
        resumable: bool = False,
    ) -> Credential:
        about: QuestionContext = {"trigger": "credential_required", "serverId": server.id, "toolName": tool}
        message = f"{server.display_name} requires authentication. Connect your account to continue."
        if scope is not None:
            about["scope"] = scope
            message = f"{server.display_name} needs more access for {tool}. Connect your account again to allow it."
        elicitation = new_elicitation(
            conversation_id=context.conversation_id,
            user_id=user_id,
            run_id=context.run_id,
            mode="url",
            message=message,
            timeout_s=self.timeout_s,
            url="about:blank",
            context=about,
        )
        token = self.links.sign(elicitation.id, user_id)
        elicitation = replace(elicitation, url=f"{self.public_url}/auth/connect?{urlencode({'t': token})}")
        assert context.asker is not None  # can_ask
        [resolution] = await context.asker.ask(
            [elicitation], trigger="credentials", state={"kind": "rerun"}, resumable=resumable
        )
        if resolution.outcome == "accepted":
            # The callback stores the token before it resolves the elicitation, so it is there now.
            credential = await self.vault.credential(server.id, user_id)
            if credential is not None:
                return credential
        raise CredentialRefused(NOT_PROVIDED)


def _expiring(credential: Credential) -> bool:
    return credential.expires_at is not None and credential.expires_at - REFRESH_MARGIN_S <= time.time()
