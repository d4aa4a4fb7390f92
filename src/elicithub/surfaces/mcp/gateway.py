"""The hub as an MCP gateway: `/mcp` lists, beside one tool per agent, every downstream tool its caller may use.

The tools are the ones an agent is offered, listed with the caller's own context (`Tools.list_tools`): `SERVER.TOOL`
as its server gives it, `AGENT.send_message` for an A2A agent, and for a user-scoped server the caller has not
signed in to, its configured `tools:` or `SERVER.connect`. The list comes in pages of `PAGE` tools.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from elicithub.runtime.models import ToolSpec
from elicithub.runtime.tools import CallContext, Tools
from elicithub.surfaces.gates import user_of

PAGE = 100
"""Tools per `tools/list` page; past it, the result has a `nextCursor`."""


class Gateway:
    """`tools`: whatever runs the agents' tools (None: `/mcp` offers the agents only)."""

    def __init__(self, tools: Tools | None, user_for: Callable[[str], str | None]) -> None:
        self.tools = tools
        self.user_for = user_for

    async def listing(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: `tools/list` gets the downstream tools after the agents' (the SDK's own listing), paged."""
        if ctx.method != "tools/list":
            return await call_next(ctx)
        params: Any = ctx.params or {}
        start = _offset(params.get("cursor"))
        result = await call_next(ctx)
        assert isinstance(result, dict)  # the SDK's listing, serialized
        listed = [*result.get("tools", []), *await self._downstream(ctx)]
        if start > len(listed):
            raise MCPError(mt.INVALID_PARAMS, "This cursor is not one of this list's.")
        result["tools"] = listed[start : start + PAGE]
        result.pop("nextCursor", None)
        if start + PAGE < len(listed):
            result["nextCursor"] = str(start + PAGE)
        return result

    async def _downstream(self, ctx: ServerRequestContext[Any, Any]) -> list[dict[str, Any]]:
        user = user_of(getattr(ctx.request, "headers", None), self.user_for)
        if self.tools is None or user is None:
            return []
        context = CallContext("", "", user, supports_elicitation=False, surface="mcp")
        return [_wire(spec) for spec in await self.tools.list_tools(context)]


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
