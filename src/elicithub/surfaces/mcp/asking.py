"""How the hub's MCP surface puts a run's questions to its client, in either era: the `elicitation/create` requests a
round or a task carries, a question asked back on a 2025-11-25 session (on the stream of the request that waits for
it), and the call's result when the run ends."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as mt
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata

from elicithub.core.elicitation import Answer, Elicitation
from elicithub.errors import AlreadyResolved, Expired, InvalidContent
from elicithub.protocol.mcp_tasks import RELATED_TASK
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.runtime.taken import Sent
from elicithub.surfaces.pauses import Ended, ends_with_sign_in

Start = Callable[[Caller], Awaitable[Sent]]
"""Starts a call's run for its caller: an agent's run for its message, or a direct call's."""

Finish = Callable[[str, Ended, set[str]], mt.CallToolResult]
"""The call's result of its run's end (its conversation, the end, the client's question modes): `call_result` for an
agent's, `direct_result` for a direct call's."""


def modes_of(capabilities: mt.ClientCapabilities | None) -> set[str]:
    """The elicitation modes a client can show: an empty `elicitation` object means form (MCP 2025-11-25)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return set()
    modes = {m for m, on in (("form", elicitation.form), ("url", elicitation.url)) if on is not None}
    return modes or {"form"}


def elicit_request(elicitation: Elicitation, related_task: str | None = None) -> mt.ElicitRequest:
    """The question as `elicitation/create`; `related_task` marks it as asked for that 2025-11-25 task."""
    meta: Any = {RELATED_TASK: {"taskId": related_task}} if related_task is not None else None
    if elicitation.mode == "url":
        assert elicitation.url is not None
        params: mt.ElicitRequestParams = mt.ElicitRequestURLParams(
            message=elicitation.message, url=elicitation.url, elicitation_id=elicitation.id, _meta=meta
        )
    else:
        params = mt.ElicitRequestFormParams(
            message=elicitation.message,
            requested_schema=elicitation.requested_schema or {"type": "object"},
            _meta=meta,
        )
    return mt.ElicitRequest(params=params)


def call_result(conversation_id: str, ended: Ended, modes: set[str]) -> mt.CallToolResult:
    """The agent's answer as the tool's result. A tool that failed while this client could not be asked anything
    makes it an error (the tool may have needed the questions the client never declared it could show)."""
    return mt.CallToolResult(
        content=[mt.TextContent(type="text", text=ended.text)],
        structured_content={"conversationId": conversation_id},
        is_error=ended.error or (not modes and ended.tool_failed),
    )


def direct_result(_: str, ended: Ended, __: set[str]) -> mt.CallToolResult:
    """A direct call's result: the downstream server's as it gave it; else (the call never reached it: refused, not
    approved, or its run failed) the hub's reason, as an error."""
    call = ended.last_call
    if call is not None and call.result is not None:
        # The downstream server's serverInfo stamp names that server, and the hub answers this client: the SDK
        # stamps the hub's own (2026-07-28) only where the result has none.
        meta = {k: v for k, v in (call.result.get("_meta") or {}).items() if k != mt.SERVER_INFO_META_KEY}
        return mt.CallToolResult.model_validate({**call.result, "_meta": meta or None})
    text = call.text if call is not None else ended.text
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=call is None or call.is_error)


async def ask_back(
    conversations: Conversations,
    session: ServerSession,
    request_id: mt.RequestId | None,
    caller: Caller,
    elicitation: Elicitation,
    related_task: str | None = None,
) -> None:
    """Ask the question on the stream of request `request_id` and take the client's answer as the person's."""
    via = ServerMessageMetadata(related_request_id=request_id)
    result = await session.send_request(elicit_request(elicitation, related_task), mt.ElicitResult, metadata=via)
    answer = Answer(result.action, result.content if result.action == "accept" else None)
    if ends_with_sign_in(elicitation, answer):
        resolution = await conversations.wait(caller, elicitation.id)
        if resolution.outcome == "accepted":
            await session.send_elicit_complete(elicitation.id, request_id)
        return
    try:
        await conversations.answer(caller, elicitation.id, answer)
    except InvalidContent:
        # The client's form let through what the question does not take: the question is cancelled.
        with contextlib.suppress(AlreadyResolved, Expired):
            await conversations.answer(caller, elicitation.id, Answer("cancel"))
    except (AlreadyResolved, Expired):
        pass
