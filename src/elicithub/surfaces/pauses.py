"""The pause driver of the protocol surfaces (MCP, A2A): follow a run until it pauses with questions its client can
be shown, or ends; and go on with it after a round's answers.

Like the MCP SDK's input-required driver, it does no I/O of its own: each surface passes in how it shows a pause
(`Show`), and what to do when the run works again (`Resumed`); the driver returns where the run stopped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from elicithub.core.elicitation import Answer, Elicitation
from elicithub.core.events import (
    ElicitationResolved,
    ModelStatus,
    RunFinished,
    RunPaused,
    StreamEvent,
    ToolCallFinished,
    ToolStatus,
)
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.surfaces import text_after_tools


@dataclass(frozen=True)
class Paused:
    """The run waits on `questions`, which its client answers in a later request; the run's events go on after
    position `after` of its conversation's log."""

    run_id: str
    questions: list[Elicitation]
    after: int


@dataclass(frozen=True)
class Ended:
    """The run's end: its last words (its text after its last tool call), whether it ended in error, whether a
    tool call of it failed on the way, and how its last tool call ended (a direct call's result)."""

    text: str
    error: bool
    tool_failed: bool
    last_call: ToolCallFinished | None = None


Show = Callable[[Paused], Awaitable[bool]]
"""Shows a pause's questions to the client. True: the run goes on in this same request, as they are answered here
(asked back on the client's session) or out of band (a sign-in); False: the client answers in a later request."""

Resumed = Callable[[], Awaitable[None]]
"""Hears that every question of a pause the run went on through has ended: the run works again."""

Status = Callable[[str], Awaitable[None]]
"""Hears what a tool call of the run says it does now (waiting for an approval others give, a downstream task's
progress), and what its model's request does (retried while the provider is busy)."""

Seen = Callable[[StreamEvent], Awaitable[None]]
"""Hears each of the run's events as it comes, before the driver acts on it (a surface that streams the run's text:
what it holds of it is sent before a pause is shown)."""


async def _nothing() -> None:
    return None


class PauseDriver:
    """One caller's runs as a protocol client sees them: only the questions `can_show` accepts reach it, and one it
    cannot show is cancelled at once (nobody could ever answer it)."""

    def __init__(
        self, conversations: Conversations, caller: Caller, can_show: Callable[[Elicitation], bool] = lambda _: True
    ) -> None:
        self.conversations = conversations
        self.caller = caller
        self.can_show = can_show

    async def open(self, elicitation_ids: Iterable[str]) -> list[Elicitation]:
        """The questions of `elicitation_ids` still open that the client can be shown, in that order."""
        shown = []
        for elicitation in await self.conversations.open_questions(self.caller, elicitation_ids):
            if self.can_show(elicitation):
                shown.append(elicitation)
            else:
                await self.conversations.cancel(self.caller, elicitation.id)
        return shown

    async def follow(
        self,
        conversation_id: str,
        run_id: str,
        after: int,
        show: Show,
        resumed: Resumed = _nothing,
        status: Status | None = None,
        seen: Seen | None = None,
    ) -> Paused | Ended | None:
        """Follow the run from position `after` until it pauses with questions the client answers later (Paused)
        or ends (Ended), telling `status` what its calls say they do, and `seen` each event. None: its stream ended
        before the run did (this hub is stopping)."""
        following = await self.conversations.follow(self.caller, conversation_id, run_id, after)
        text: list[str] = []
        tool_failed = False
        last_call: ToolCallFinished | None = None
        going_on: set[str] = set()
        async with contextlib.aclosing(following.events) as events:
            async for seq, event in events:
                if seen is not None:
                    await seen(event)
                if isinstance(event, RunPaused):
                    questions = await self.open(event.elicitation_ids)
                    if questions:
                        paused = Paused(run_id, questions, seq)
                        if not await show(paused):
                            return paused
                        going_on = {e.id for e in questions}
                elif isinstance(event, ToolStatus | ModelStatus) and status is not None:
                    await status(event.text)
                elif isinstance(event, ElicitationResolved) and event.elicitation_id in going_on:
                    going_on.discard(event.elicitation_id)
                    if not going_on:
                        await resumed()
                text = text_after_tools(text, event)
                if isinstance(event, ToolCallFinished):
                    tool_failed, last_call = tool_failed or event.is_error, event
                if isinstance(event, RunFinished):
                    return Ended("".join(text), event.reason == "error", tool_failed, last_call)
        return None

    async def resume(
        self,
        conversation_id: str,
        run_id: str,
        elicitation_ids: Iterable[str],
        after: int,
        show: Show,
        resumed: Resumed = _nothing,
        status: Status | None = None,
        seen: Seen | None = None,
    ) -> Paused | Ended | None:
        """Go on after a round's answers were taken: the round's questions still open are shown again, for a later
        request to answer; else the run works again, and is followed from where it paused."""
        rest = await self.open(elicitation_ids)
        if rest:
            paused = Paused(run_id, rest, after)
            await show(paused)
            return paused
        await resumed()
        return await self.follow(conversation_id, run_id, after, show, resumed, status, seen)


def ends_with_sign_in(elicitation: Elicitation, answer: Answer) -> bool:
    """Whether the client's answer leaves the question open until a sign-in completes: `accept` on a url question
    only says the person agreed to open the link (MCP 2025-11-25). The hub's own sign-ins (and an A2A agent's) end
    when the sign-in does, so the call waits for that; a downstream MCP server's link is that server's to follow up,
    so the `accept` is its answer, passed on at once."""
    return (
        elicitation.mode == "url"
        and answer.action == "accept"
        and elicitation.context.get("trigger") != "mcp_elicitation"
    )
