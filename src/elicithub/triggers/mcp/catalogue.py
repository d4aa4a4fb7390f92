"""One MCP server's tool catalogue: its tools listed (openly, from the store, or from `tools:`), unknown (a
user-scoped server whose tools only a person's sign-in shows, offered meanwhile as `SERVER.connect`), or
unreachable (listing raises)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict

import mcp_types as mt

from elicithub.config import McpServerConfig
from elicithub.core.ports import KeyValueStore
from elicithub.runtime.models import ToolSpec
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.triggers.credentials import CredentialGate, CredentialRefused

log = logging.getLogger(__name__)

TOOLS_TTL_S = 30.0
LISTING_TTL_S = 7 * 24 * 3600.0
"""How long the store keeps a user-scoped server's last listing (refreshed whenever someone lists it)."""
CONNECT = "connect"
"""The tool that stands for a user-scoped server's tools until the person's sign-in lists them."""

Fetch = Callable[[str | None], Awaitable[list[mt.Tool] | None]]
"""Lists the server's tools with an Authorization header; None when the server rejected that user's token."""

NOBODY = CallContext("", "", None, False)


class Catalogue:
    """What the model is offered of one server, and what a call with the person's token learns of it."""

    def __init__(
        self, server: McpServerConfig, fetch: Fetch, gate: CredentialGate | None, listings: KeyValueStore | None
    ) -> None:
        self.server = server
        self.gate = gate
        self.listings = listings  # where user-scoped servers' tool listings are kept for everyone
        self._fetch = fetch
        self._tools: tuple[float, list[ToolSpec]] | None = None
        self._listing = asyncio.Lock()
        self._probed_at = -TOOLS_TTL_S  # when a listing without a token was last tried (and refused)

    async def list_tools(self, context: CallContext | None) -> list[ToolSpec]:
        """The server's tools when they are known; `connect` alone for a user-scoped server whose tools only the
        person's sign-in can show (never asked here: only a call that targets the server asks); raises when the
        server cannot be reached."""
        if self._tools is not None and time.monotonic() - self._tools[0] < TOOLS_TTL_S:
            return self._tools[1]
        # One listing at a time: a burst of runs (a restart resuming hundreds) shares one answer.
        async with self._listing:
            if self._tools is not None and time.monotonic() - self._tools[0] < TOOLS_TTL_S:
                return self._tools[1]
            found = await self._list(context)
        return found if found is not None else [self._connect_spec()]

    async def unlocked(self, tool: str, header: str | None) -> ToolOutcome | None:
        """With the person's token in hand: a server whose tools were unknown is listed now (the listing kept for
        every hub); `connect` is answered here, and a tool the new listing lacks is an error. None: go on and call."""
        fresh = False
        if self._tools is None and not self.server.tools:
            known = await self._known()
            if known is None:
                try:
                    known = await self._listed(header)
                except Exception as exc:
                    log.warning("listing %s after the sign-in failed: %s", self.server.id, exc)
                    return None  # the call itself tells what is wrong
                fresh = True
            self._tools = (time.monotonic(), known)
        listed = self._tools[1] if self._tools is not None else self._declared()
        if any(t.name == tool for t in listed):
            return None
        names = ", ".join(f"{self.server.id}.{t.name}" for t in listed) or "none"
        if tool == CONNECT:
            return ToolOutcome(f"Your {self.server.display_name} account is connected. Its tools: {names}.")
        if fresh:
            return ToolOutcome(f"There is no tool {self.server.id}.{tool}. Its tools: {names}.", is_error=True)
        return None

    async def _list(self, context: CallContext | None) -> list[ToolSpec] | None:
        """The tools, or None when only a sign-in by this person can list them."""
        server = self.server
        cached = self._tools[1] if self._tools is not None else None
        header = await self._listing_authorization(context)
        if server.credential_scope == "project" and header is None:
            return cached if cached is not None else self._declared()
        if server.credential_scope == "user" and header is None:
            if server.tools or cached is not None:
                # Never call a protected server without its token: offer what we know of its tools.
                return cached if cached is not None else self._declared()
            known = await self._known()
            if known is not None:
                self._tools = (time.monotonic(), known)
                return known
            if time.monotonic() - self._probed_at < TOOLS_TTL_S:
                return None
            # Nobody has listed its tools yet: some servers list them without a token.
            self._probed_at = time.monotonic()
            with contextlib.suppress(Exception):
                return await self._listed(None)
            return None
        return await self._listed(header)

    def _connect_spec(self) -> ToolSpec:
        name = self.server.display_name
        description = f"Connect your {name} account to use its tools (any {self.server.id}.* tool connects too)."
        return ToolSpec(CONNECT, description, {"type": "object", "properties": {}}, stands_in=True)

    async def _listed(self, header: str | None) -> list[ToolSpec]:
        """The server's tools, listed with `header` (raises when it refuses); kept here and in the store."""
        server = self.server
        listed = await self._fetch(header)
        if listed is None:  # this user's token was rejected: offer what we know
            return self._tools[1] if self._tools is not None else self._declared()
        specs = [_spec(t) for t in listed]
        self._tools = (time.monotonic(), specs)
        if server.credential_scope == "user" and self.listings is not None:
            # Whoever listed them, everyone may see them: a user without a token is asked when a tool is called.
            data = json.dumps([asdict(s) for s in specs]).encode()
            await self.listings.put(f"tools:{server.id}", data, LISTING_TTL_S)
        return specs

    async def _known(self) -> list[ToolSpec] | None:
        """The tools last listed with any user's token, on any hub sharing the store."""
        if self.listings is None:
            return None
        data = await self.listings.get(f"tools:{self.server.id}")
        return None if data is None else [ToolSpec(**s) for s in json.loads(data)]

    def _declared(self) -> list[ToolSpec]:
        return [ToolSpec(t.name, t.description or t.name, dict(t.input_schema)) for t in self.server.tools]

    async def _listing_authorization(self, context: CallContext | None) -> str | None:
        server = self.server
        if self.gate is None or server.credential_scope == "none":
            return None
        if server.credential_scope == "project":
            try:
                return await self.gate.authorization(server, "tools/list", context or NOBODY)
            except CredentialRefused:
                return None
        if context is None or context.user_id is None:
            return None
        credential = await self.gate.usable(server, context.user_id)
        return None if credential is None else f"Bearer {credential.access_token}"


def _spec(tool: mt.Tool) -> ToolSpec:
    """A listed tool as the hub keeps it: what the model is shown, and what `/mcp` shows as it came."""
    return ToolSpec(
        tool.name,
        tool.description or tool.title or tool.name,
        dict(tool.input_schema),
        title=tool.title,
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        annotations=tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None,
    )
