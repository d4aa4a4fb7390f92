"""The hub as an MCP gateway: `/mcp` lists, beside one tool per agent, every downstream tool its caller may use, and
calls it as an agent would, with no model in between.

The tools are the ones an agent is offered, listed with the caller's own context (`Tools.list_tools`): `SERVER.TOOL`
as its server gives it, `AGENT.send_message` for an A2A agent, and for a user-scoped server the caller has not
signed in to, its configured `tools:` or `SERVER.connect`. The list comes in pages of `PAGE` tools, and a session
that listed it hears when it changes (surfaces/mcp/list_changed.py). A call of a tool the caller is not offered (no
server has it, or the caller may not use it) is refused as an unknown tool, the same error either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from elicithub.runtime.models import ToolSpec
from elicithub.runtime.tools import CallContext, Tools
from elicithub.surfaces.gates import user_of
from elicithub.surfaces.mcp.list_changed import ToolListChanges
from elicithub.triggers.mcp.catalogue import CONNECT

PAGE = 100
"""Tools per `tools/list` page; past it, the result has a `nextCursor`."""


Direct = Callable[[ServerRequestContext[Any, Any], str, dict[str, Any]], Awaitable[HandlerResult]]
"""Makes a tools/call of a downstream tool (its request, the tool's name, its arguments): the surface's direct call."""


class Gateway:
    """`agents`: the agents' tools; `tools`: whatever runs the agents' tools (None: `/mcp` offers the agents only);
    `direct`: how a call of a downstream tool is made; `changes`: who hears that a person's tools changed;
    `connectable`: the user-scoped servers, whose `SERVER.connect` stays callable once their tools are listed."""

    def __init__(
        self,
        agents: set[str],
        tools: Tools | None,
        user_for: Callable[[str], str | None],
        direct: Direct,
        changes: ToolListChanges,
        connectable: frozenset[str] = frozenset(),
    ) -> None:
        self.agents = agents
        self.connectable = connectable
        self.tools = tools
        self.user_for = user_for
        self.direct = direct
        self.changes = changes

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """`tools/list` gets the downstream tools after the agents' (the SDK's own listing), paged; `tools/call` of
        a downstream tool is made directly, and of a tool the caller is not offered refused before anything runs;
        the caller's sessions hear when their tools change."""
        params: Any = ctx.params or {}
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if ctx.method == "subscriptions/listen" and modern and (user := self._user(ctx)) is not None:
            listening = mt.SubscriptionsListenRequestParams.model_validate(params)
            return await ListenHandler(self.changes.bus(user))(ctx, listening)
        if ctx.method == "initialize" and self.tools is not None:
            result: Any = await call_next(ctx)
            result["capabilities"].setdefault("tools", {})["listChanged"] = True
            return result  # type: ignore[no-any-return]
        if ctx.method == "tools/call":
            name = params.get("name")
            if name in self.agents:
                return await call_next(ctx)
            # A round's retry goes on with a call let through when it began (its state, which the SDK's boundary
            # checked, was sealed for this tool, these arguments and this caller): what the caller may use may have
            # changed since, by that very call's sign-in.
            if params.get("requestState") is None and not await self._offered(ctx, name):
                raise MCPError(mt.INVALID_PARAMS, f"Unknown tool: {name}")
            arguments = params.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise MCPError(mt.INVALID_PARAMS, "arguments: expected an object.")
            return await self.direct(ctx, name, arguments)
        if ctx.method != "tools/list":
            return await call_next(ctx)
        start = _offset(params.get("cursor"))
        listing = await call_next(ctx)
        assert isinstance(listing, dict)  # the SDK's listing, serialized
        if not modern and (user := self._user(ctx)) is not None:
            self.changes.listed(user, ctx.session)
        listed = [*listing.get("tools", []), *await self._downstream(ctx)]
        if start > len(listed):
            raise MCPError(mt.INVALID_PARAMS, "This cursor is not one of this list's.")
        listing["tools"] = listed[start : start + PAGE]
        listing.pop("nextCursor", None)
        if start + PAGE < len(listed):
            listing["nextCursor"] = str(start + PAGE)
        return listing

    async def _downstream(self, ctx: ServerRequestContext[Any, Any]) -> list[dict[str, Any]]:
        return [_wire(spec) for spec in await self._specs(ctx)]

    async def _offered(self, ctx: ServerRequestContext[Any, Any], name: object) -> bool:
        """Whether the caller may call `name`: a listed tool, or any tool of a server listed as `SERVER.connect`
        (its sign-in may show it), as an agent may; and a user-scoped server's `SERVER.connect` once another
        person's sign-in listed its tools in its place (a client may still hold the name, and it still signs in
        whoever has not)."""
        if not isinstance(name, str):
            return False
        prefix, _, tool = name.partition(".")
        specs = await self._specs(ctx)
        if tool == CONNECT and prefix in self.connectable:
            return any(s.name.partition(".")[0] == prefix for s in specs)
        return any(s.name == name or (s.stands_in and s.name.partition(".")[0] == prefix) for s in specs)

    def _user(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The request's user, when `/mcp` offers downstream tools (else nobody's tools change)."""
        return None if self.tools is None else user_of(getattr(ctx.request, "headers", None), self.user_for)

    async def _specs(self, ctx: ServerRequestContext[Any, Any]) -> list[ToolSpec]:
        """The downstream tools the request's user is offered, as an agent is (none without a user)."""
        user = self._user(ctx)
        if self.tools is None or user is None:
            return []
        return await self.tools.list_tools(CallContext("", "", user, supports_elicitation=False, surface="mcp"))


def _offset(cursor: object) -> int:
    """Where a page starts: a cursor is an earlier page's `nextCursor`, else the request is refused."""
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or not cursor.isdigit():
        raise MCPError(mt.INVALID_PARAMS, "This cursor is not one of this list's.")
    return int(cursor)


def _wire(spec: ToolSpec) -> dict[str, Any]:
    tool = mt.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=mt.ToolAnnotations.model_validate(spec.annotations) if spec.annotations is not None else None,
    )
    return tool.model_dump(by_alias=True, exclude_none=True, mode="json")
