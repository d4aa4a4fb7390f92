"""Downstream MCP sessions kept open per server and credential, so a tool call does not pay for a new one.

A session's `Client` lives in a task of its own (the SDK's task groups must close in the task that opened them).
Calls share it concurrently: the SDK runs each outgoing request, and a server's requests back to the hub, in the
context of the call that sent it, so every call keeps its own Authorization check (`CallAuth`) and its own
questions (`server._question`). A server's request on the session's standalone stream is related to no call (a
TypeScript SDK server's `elicitInput()` sends it so): it runs in the session's own context, which knows the calls
in flight. The session's tool listing stays with it, so a result needs no new `tools/list`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from mcp import Client

from elicithub.triggers.http import CallAuth, authorized
from elicithub.triggers.mcp.questions import Question

log = logging.getLogger(__name__)

MAX_SESSIONS = 64
"""Sessions kept per server (one per credential in use). Past it the least recently used idle one is closed."""
IDLE_S = 300.0
"""A session nobody used for this long is closed (its connections with it); the next call opens a new one."""
CLOSE_S = 5.0


@dataclass(eq=False)
class _Session:
    server_id: str
    header: str | None
    opened: asyncio.Future[Client]
    opener: CallAuth
    """The first caller's auth check, which the opening's requests answer to."""
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None  # its holder, set as it starts
    in_use: int = 0
    last_used: float = field(default_factory=time.monotonic)
    broken: bool = False
    calls: Counter[Question] = field(default_factory=Counter)  # the tool calls in flight on it


_serving: contextvars.ContextVar[_Session | None] = contextvars.ContextVar("elicithub_mcp_session", default=None)
"""Set in a session's own tasks (its standalone stream's requests run there), unset in the calls' contexts."""


def standalone_caller() -> Question | None:
    """The call that a server's request on a kept session's standalone stream belongs to: the one tool call in
    flight on that session. With none or several in flight nobody can tell whose it is: None, and a warning.
    None too outside a kept session's own tasks."""
    session = _serving.get()
    if session is None:
        return None
    if len(session.calls) == 1:
        return next(iter(session.calls))
    log.warning(
        "%s asked a question on its session's standalone stream while %d of its tool calls were in flight; "
        "it was declined: the hub cannot tell which call it belongs to",
        session.server_id,
        len(session.calls),
    )
    return None


class Sessions:
    """The open sessions to one MCP server, keyed by the Authorization header they carry."""

    def __init__(self, connect: Callable[[], Client], server_id: str, max_sessions: int = MAX_SESSIONS) -> None:
        self._connect = connect
        self._server_id = server_id
        self._max = max_sessions
        self._open: dict[str | None, _Session] = {}

    @contextlib.asynccontextmanager
    async def using(self, auth: CallAuth, call: Question | None = None) -> AsyncIterator[Client]:
        """A session carrying `auth.header`, opened if needed (its opening's 401/403 is noted on `auth`); `call`:
        the tool call that uses it, in flight on it meanwhile."""
        session = self._open.get(auth.header)
        if session is None or session.broken:
            session = self._start(auth)
        session.in_use += 1
        if call is not None:
            session.calls[call] += 1
        try:  # a session that fails to open leaves `_open` by itself (`_hold`)
            opened = session.opened
            try:
                client = opened.result() if opened.done() else await asyncio.shield(opened)
            except Exception:
                _heard(auth, session.opener)
                raise
            yield client
        finally:
            if call is not None:
                session.calls -= Counter({call: 1})
            session.in_use -= 1
            session.last_used = time.monotonic()
            if session.broken and not session.in_use:
                session.closing.set()  # discarded while in use: its last call closes it

    def discard(self, auth: CallAuth) -> None:
        """Close the session carrying `auth.header` once its calls are done (its token was refused, or the
        server forgot the session): the next call opens a new one."""
        session = self._open.get(auth.header)
        if session is not None:
            self._discard(session)

    def _start(self, auth: CallAuth) -> _Session:
        self._trim()
        session = _Session(self._server_id, auth.header, asyncio.get_running_loop().create_future(), auth)
        # A fresh context: the session's own tasks must not carry the first caller's question or span.
        session.task = asyncio.get_running_loop().create_task(self._hold(session, auth), context=contextvars.Context())
        self._open[auth.header] = session
        return session

    async def _hold(self, session: _Session, auth: CallAuth) -> None:
        _serving.set(session)
        try:
            with authorized(auth):  # the opening requests answer to the first caller's auth check
                async with self._connect() as client:
                    # The SDK checks each result against the tool's output schema, listing the tools when it has
                    # not yet: list them once here, not once per concurrent first call.
                    with contextlib.suppress(Exception):
                        await client.list_tools()
                    session.opened.set_result(client)
                    await self._until_closed(session)
        except Exception as exc:
            if session.opened.done():
                log.info("the session to %s ended: %s", self._server_id, exc)
            else:
                _fail(session.opened, exc)
        finally:
            session.broken = True
            if not session.opened.done():
                _fail(session.opened, ConnectionError(f"the session to {self._server_id} closed"))
            if self._open.get(session.header) is session:
                del self._open[session.header]

    async def _until_closed(self, session: _Session) -> None:
        """Until the session is closed: discarded, the hub closing, or nobody using it for IDLE_S."""
        while not session.closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(session.closing.wait(), IDLE_S)
            if not session.in_use and time.monotonic() - session.last_used >= IDLE_S:
                self._discard(session)

    def _discard(self, session: _Session) -> None:
        session.broken = True
        if self._open.get(session.header) is session:
            del self._open[session.header]
        if not session.in_use:
            session.closing.set()

    def _trim(self) -> None:
        """Past the bound, close the least recently used sessions nobody is using."""
        idle = sorted((s for s in self._open.values() if s.in_use == 0), key=lambda s: s.last_used)
        while len(self._open) >= self._max and idle:
            self._discard(idle.pop(0))

    async def close(self) -> None:
        sessions, self._open = list(self._open.values()), {}
        for session in sessions:
            session.closing.set()
        tasks = [s.task for s in sessions if s.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=CLOSE_S)
            for task in pending:
                task.cancel()


def _heard(auth: CallAuth, opener: CallAuth) -> None:
    """A call that waited on another's opening of the session hears what the server said of their one credential
    (its 401 or 403 reached the opener's check), so it asks for a new sign-in too, not failing as if the server had."""
    if opener is not auth:
        auth.rejected = auth.rejected or opener.rejected
        if auth.insufficient_scope is None:
            auth.insufficient_scope = opener.insufficient_scope


def _fail(opened: asyncio.Future[Client], exc: BaseException) -> None:
    opened.set_exception(exc)
    opened.exception()  # seen: nobody may be waiting any more, and asyncio would log it as never retrieved
