"""Telling a person's open `/mcp` sessions that the tools they may use changed (`notifications/tools/list_changed`), on
every hub: a sign-in to a user-scoped server may list its tools where `SERVER.connect` stood.

A 2025-11-25 session is told on its standalone stream (the SSE stream of its GET) once it has listed its tools; a
2026-07-28 client on each `subscriptions/listen` stream it opened for tool changes. Each belongs to the user whose
token opened it, and only that user's changes reach it. A sign-in completes on whichever hub serves its callback, so
the change is cast to every hub sharing the store: best effort, as the notification itself is (a client that missed
one sees the new tools when it next lists them). Every hub hears the casts from its start; the MCP SDK is imported
with the MCP surface, by its first request (a session or stream to tell exists only from then on).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from elicithub.core.ports import Casts

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.session import ServerSession
    from mcp.server.subscriptions import ServerEvent, SubscriptionBus

TAG = '{"tools":'
"""How a cast of this kind starts (`{"tools":USER}`): the hub's other casts pass it over, and it theirs, unread."""

Listener = Callable[["ServerEvent"], None]
K = TypeVar("K")
V = TypeVar("V")


class ToolListChanges:
    def __init__(self, casts: Casts) -> None:
        self.casts = casts
        self._connections: dict[str, dict[int, Connection]] = {}
        """By user: the 2025-11-25 connections that listed their tools, until they close."""
        self._listeners: dict[str, dict[object, Listener]] = {}
        """By user: what feeds each of their 2026-07-28 listen streams."""
        self._telling: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Hear the changes cast by every hub (this one's too)."""
        await self.casts.listen(self._received)

    def changed(self, user_id: str) -> None:
        """What `user_id` may use may have changed (they connected an account): tell their sessions on every hub."""
        self.casts.send(json.dumps({"tools": user_id}, separators=(",", ":")))

    def listed(self, user_id: str, session: ServerSession) -> None:
        """A 2025-11-25 session of `user_id` listed its tools: it hears of their changes until it closes."""
        # The SDK hands middleware its connection only inside the session; the connection's exit stack is where the
        # SDK says to hang what ends with it.
        connection: Connection = session._connection
        mine = self._connections.setdefault(user_id, {})
        if id(connection) not in mine:  # kept while it is held here, so no other connection takes its id
            mine[id(connection)] = connection
            connection.exit_stack.callback(_forget, self._connections, user_id, id(connection))

    def bus(self, user_id: str) -> SubscriptionBus:
        """Where `user_id`'s listen streams (2026-07-28) subscribe: each hears that user's changes alone."""
        return _UserBus(self._listeners, user_id)

    def _received(self, raw: str) -> None:
        if not raw.startswith(TAG):
            return
        user_id = json.loads(raw)["tools"]
        listeners = list(self._listeners.get(user_id, {}).values())
        if listeners:  # only once the MCP surface is built: the SDK is imported by then
            from mcp.server.subscriptions import ToolsListChanged

            for listener in listeners:
                listener(ToolsListChanged())
        connections = list(self._connections.get(user_id, {}).values())
        if connections:
            telling = asyncio.get_running_loop().create_task(_tell(connections))
            self._telling.add(telling)  # held until done: the loop keeps only a weak reference
            telling.add_done_callback(self._telling.discard)


class _UserBus:
    """One user's listen streams, as the SDK's listen handler subscribes them (a `SubscriptionBus`)."""

    def __init__(self, listeners: dict[str, dict[object, Listener]], user_id: str) -> None:
        self._listeners = listeners
        self._user_id = user_id

    async def publish(self, event: ServerEvent) -> None:
        for listener in list(self._listeners.get(self._user_id, {}).values()):
            listener(event)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        token = object()
        self._listeners.setdefault(self._user_id, {})[token] = listener
        return lambda: _forget(self._listeners, self._user_id, token)


async def _tell(connections: list[Connection]) -> None:
    for connection in connections:
        await connection.send_tool_list_changed()  # on its standalone stream; dropped (never raised) without one


def _forget(by_user: dict[str, dict[K, V]], user_id: str, key: K) -> None:
    mine = by_user.get(user_id)
    if mine is not None:
        mine.pop(key, None)
        if not mine:
            del by_user[user_id]
