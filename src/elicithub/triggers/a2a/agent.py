"""One downstream A2A agent as a trigger: one tool, `send_message`, described from the agent's card; the task's
questions asked of the person (a task still waiting after its sign-in is told it is done, once); after a restart the
task is picked up again (GetTask), never sent twice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, NotRequired, TypedDict

import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_message_text, new_text_message
from a2a.types import AgentCard, Message, Role, Task, TaskState
from a2a.utils.constants import TransportProtocol

from elicithub.config import A2aAgentConfig
from elicithub.core.elicitation import Answer
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.runs import Pause
from elicithub.core.waiting import Resolution
from elicithub.errors import HubError, QuestionRefused
from elicithub.runtime.asker import Asker
from elicithub.runtime.models import ToolSpec
from elicithub.runtime.tools import CallContext, ToolOutcome
from elicithub.triggers.a2a import A2aShared
from elicithub.triggers.a2a.questions import Round, answer_message, build_round, status_text
from elicithub.triggers.a2a.task import INTERRUPTED, TERMINAL, TaskLink
from elicithub.triggers.credentials import CredentialRefused

log = logging.getLogger(__name__)

TOOL = "send_message"
INPUT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What to tell or ask the agent."}},
    "required": ["message"],
}
CARD_TTL_S = 300.0
"""How long an agent card is trusted before it is fetched again (a stale one still serves if the agent is down)."""
CARD_TIMEOUT_S = 10.0
"""The longest a card fetch may take: every chat turn lists the tools, and waits for the slowest agent."""
CARD_RETRY_S = 30.0
"""How long an agent whose card could not be fetched is left alone before the next try."""


class A2aAgentTrigger:
    """The tool of one configured A2A agent, under its id."""

    def __init__(self, agent: A2aAgentConfig, shared: A2aShared) -> None:
        self.agent = agent
        self.shared = shared
        bindings: list[str] = [TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON]  # in the card's order
        self._factory = ClientFactory(
            ClientConfig(streaming=False, httpx_client=shared.http, supported_protocol_bindings=bindings)
        )
        self._streaming = ClientFactory(
            ClientConfig(streaming=True, httpx_client=shared.http, supported_protocol_bindings=bindings)
        )
        self._card: tuple[float, AgentCard] | None = None
        self._failed: tuple[float, Exception] | None = None
        self._fetching = asyncio.Lock()

    @property
    def prefix(self) -> str:
        return self.agent.id

    async def close(self) -> None:
        return None  # the HTTP client is shared; whoever made it closes it

    async def card(self, header: str | None = None) -> AgentCard:
        """The agent's card, fetched with the SDK's resolver and kept for a while; one fetch at a time (a burst
        of runs shares it), and an agent that could not be reached is not tried again at once."""
        async with self._fetching:
            now = time.monotonic()
            if self._card is not None and now - self._card[0] < CARD_TTL_S:
                return self._card[1]
            if self._failed is not None and now - self._failed[0] < CARD_RETRY_S:
                if self._card is not None:
                    return self._card[1]
                raise self._failed[1]
            headers = {"Authorization": header} if header else {}
            timeout = min(CARD_TIMEOUT_S, self.agent.timeout_s)
            resolver = A2ACardResolver(self.shared.http, self.agent.url)
            try:
                card = await resolver.get_agent_card(http_kwargs={"headers": headers, "timeout": timeout})
            except Exception as exc:
                self._failed = (now, exc)
                if self._card is not None:
                    return self._card[1]
                raise
            self._card, self._failed = (now, card), None
            return card

    async def list_tools(self, context: CallContext | None) -> list[ToolSpec]:
        header = None
        if self.agent.credential_scope == "project" and self.shared.gate is not None:
            with contextlib.suppress(CredentialRefused):
                header = await self.shared.gate.authorization(self.agent, TOOL, context or _NOBODY)
        return [ToolSpec(TOOL, _describe(await self.card(header)), INPUT_SCHEMA)]

    async def call(self, tool: str, arguments: JsonObject, context: CallContext) -> ToolOutcome:
        name = f"{self.agent.id}.{tool}"
        if tool != TOOL:
            return ToolOutcome(f"There is no tool {name}.", is_error=True)
        text = arguments.get("message")
        if not isinstance(text, str) or not text.strip():
            return ToolOutcome(f"Tool {name} needs a non-empty string argument message.", is_error=True)
        gate, scope = self.shared.gate, self.agent.credential_scope
        reconnect = False
        while True:
            header = None
            if gate is not None and scope != "none":
                try:
                    header = await gate.authorization(self.agent, tool, context, reconnect=reconnect)
                except CredentialRefused as exc:
                    return ToolOutcome(str(exc), is_error=True)
            try:
                return await self._call(text, context, header)
            except _Rejected:
                log.info("%s rejected the credential for %s", self.agent.id, name)
                if scope != "user" or reconnect:
                    return ToolOutcome(f"{self.agent.display_name} rejected the credential for {name}.", is_error=True)
                reconnect = True

    async def _call(self, text: str, context: CallContext, header: str | None) -> ToolOutcome:
        resume = context.asker.resume_from() if context.asker is not None else None
        started = False
        try:
            card = await self.card(header)
            headers = {"Authorization": header} if header else None
            watcher = self._streaming.create(card) if card.capabilities.streaming else None
            call_context = ClientCallContext(timeout=self.agent.timeout_s, service_parameters=headers)
            link = TaskLink(self._factory.create(card), watcher, call_context)
            if resume is not None and resume.trigger == "a2a" and isinstance(resume.state.get("taskId"), str):
                started = True
                task = await link.get(resume.state["taskId"])  # picked up again, not sent again
                rounds = int(resume.state.get("rounds", 0))
                if not _same_question(resume, task):
                    # Its answer reached the agent before the interruption: that round is over, and a question like
                    # one of it is a new one, not to be answered with what was said then.
                    await self.shared.broker.cancel(list(resume.elicitation_ids.values()))
                    _asker(context).forget_earlier()
                    resume = None
                return await self._drive(link, task, context, rounds, resume)
            first = await link.send(new_text_message(text, role=Role.ROLE_USER))
            started = True
            if isinstance(first, Message):
                return ToolOutcome(get_message_text(first))
            return await self._drive(link, first, context, 0, None)
        except QuestionRefused as exc:
            return ToolOutcome(str(exc), is_error=True)
        except Exception as exc:  # whatever the agent or the SDK raises ends this call, never the run
            if not started and _unauthorized(exc):
                raise _Rejected from exc
            reason = f"no response within {self.agent.timeout_s:g} s" if _timed_out(exc) else _reason(exc)
            log.warning("call to A2A agent %s failed: %s", self.agent.id, reason)
            return ToolOutcome(f"The A2A agent {self.agent.id} failed during {TOOL}: {reason}", is_error=True)

    async def _drive(
        self, link: TaskLink, task: Task, context: CallContext, rounds: int, resume: Pause | None
    ) -> ToolOutcome:
        """Follow the task to its end, asking the person each time it waits for input or a sign-in."""
        while True:
            state = task.status.state
            if state in TERMINAL:
                return self._outcome(task)
            if state not in INTERRUPTED:
                async with asyncio.timeout(self.agent.timeout_s):
                    task = await link.follow(task)
                continue
            if resume is not None:
                # The round asked before the restart: its answers, waiting for those still open.
                round_ = Round(list(resume.elicitation_ids), [], bool(resume.state.get("remote")))
                pause = resume
                asked = asyncio.ensure_future(_asker(context).answers(resume))
            else:
                rounds += 1
                if rounds > self.shared.max_rounds:
                    await link.cancel(task)
                    return ToolOutcome(
                        f"The A2A agent {self.agent.id} kept asking for input for more than "
                        f"{self.shared.max_rounds} rounds; its task was cancelled.",
                        is_error=True,
                    )
                try:
                    round_ = build_round(task, self.agent, context, self.shared.timeout_s)
                except QuestionRefused:
                    await link.cancel(task)
                    raise
                pause = _pause_for(task, round_, rounds)
                asked = asyncio.ensure_future(self._ask(context, round_, pause))
            resume = None
            if state == TaskState.TASK_STATE_AUTH_REQUIRED:
                moved = await self._through_sign_in(link, task, asked, round_, pause, context)
                if moved is None:
                    await link.cancel(task)
                    return ToolOutcome(self._not_answered("sign in"), is_error=True)
                if isinstance(moved, Message):
                    return ToolOutcome(get_message_text(moved))
                task = moved
                continue
            message = answer_message(task, round_, await asked)
            if message is None:
                await link.cancel(task)
                return ToolOutcome(self._not_answered("answer"), is_error=True)
            sent = await link.send(message)
            if isinstance(sent, Message):
                return ToolOutcome(get_message_text(sent))
            task = sent

    async def _ask(self, context: CallContext, round_: Round, pause: Pause) -> dict[str, Resolution | None]:
        resolutions = await _asker(context).ask(
            round_.elicitations, trigger=pause.trigger, keys=round_.keys, state=pause.state
        )
        return dict(zip(round_.keys, resolutions, strict=True))

    async def _through_sign_in(
        self,
        link: TaskLink,
        task: Task,
        asked: asyncio.Future[dict[str, Resolution | None]],
        round_: Round,
        pause: Pause,
        context: CallContext,
    ) -> Task | Message | None:
        """The task once it goes on after the person signed in; None when they would not.

        The sign-in happens at the agent, out of band: the task may move before the person tells us they are done,
        and then the question is settled for them. An agent still waiting `sign_in_grace_s` after they say so is told.
        """
        ids = list(pause.elicitation_ids.values())
        watch = asyncio.ensure_future(link.follow(task))
        try:
            either: list[asyncio.Future[Any]] = [asked, watch]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if watch.done():
                if watch.exception() is None:
                    await self._settle(ids, context)
                else:
                    await self.shared.broker.cancel(ids)
                await asked
                return watch.result()
            resolutions = asked.result()
            if any(r is None or r.outcome != "accepted" for r in resolutions.values()):
                return None
            # Another hub goes on by itself once its own callback has the token: only other agents are told.
            if not round_.remote and not pause.state.get(_TOLD):
                await asyncio.wait([watch], timeout=self.agent.sign_in_grace_s)
                if not watch.done():
                    return await self._tell_signed_in(link, task, round_, resolutions, pause, context)
            async with asyncio.timeout(self.agent.timeout_s):
                return await watch
        finally:
            watch.cancel()
            asked.cancel()

    async def _tell_signed_in(
        self,
        link: TaskLink,
        task: Task,
        round_: Round,
        resolutions: dict[str, Resolution | None],
        pause: Pause,
        context: CallContext,
    ) -> Task | Message:
        """Tell a task still waiting for the sign-in that the person has signed in: one message, at most once.

        Noted in the pause before it is sent, as the task id is before the first message: a hub that stops in
        between never sends it again (it waits for the task instead), whichever side of the send it stopped on.
        """
        current = await link.get(task.id)
        message = answer_message(current, round_, resolutions)
        if not _same_question(pause, current) or message is None:
            return current  # it moved, or asks something else, meanwhile
        asked = {key: r.elicitation_id for key, r in resolutions.items() if r is not None}
        await _asker(context).checkpoint(pause.trigger, {**pause.state, _TOLD: True}, asked)
        log.info("told A2A agent %s that the sign-in for task %s is done", self.agent.id, task.id)
        return await link.send(message)

    async def _settle(self, ids: list[str], context: CallContext) -> None:
        for elicitation_id in ids:
            with contextlib.suppress(HubError):
                await self.shared.broker.respond(elicitation_id, Answer("accept"), context.user_id)

    def _outcome(self, task: Task) -> ToolOutcome:
        text = status_text(task)
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            artifacts = [get_artifact_text(a).strip() for a in task.artifacts]
            return ToolOutcome("\n".join(t for t in [text, *artifacts] if t))
        verb = {
            TaskState.TASK_STATE_FAILED: "failed",
            TaskState.TASK_STATE_REJECTED: "rejected",
            TaskState.TASK_STATE_CANCELED: "canceled",
        }[task.status.state]
        return ToolOutcome(f"The A2A agent {self.agent.id} {verb} the task" + (f": {text}" if text else "."), True)

    def _not_answered(self, what: str) -> str:
        return (
            f"The user did not {what} when the A2A agent {self.agent.id} asked (declined, cancelled or no answer "
            f"within {self.shared.timeout_s:g} s); its task was cancelled."
        )


class _Rejected(HubError):
    """The agent refused the credential (401) before any task was started."""


_NOBODY = CallContext("", "", None, False)

_TOLD = "toldSignedIn"
"""In a sign-in round's pause: the agent has been (or was about to be) told that the person signed in."""


class A2aState(TypedDict):
    """A round's place on the run's pause: the downstream task, how many rounds it has had, whether its questions are
    the other hop's own (`remote`), and the status it waits in (`waiting`, a `TaskState`, and its message)."""

    taskId: str
    contextId: str
    rounds: int
    remote: bool
    waiting: int
    statusMessageId: str
    toldSignedIn: NotRequired[bool]


def _asker(context: CallContext) -> Asker:
    assert context.asker is not None  # build_round refuses first when the call cannot ask
    return context.asker


def _pause_for(task: Task, round_: Round, rounds: int) -> Pause:
    """A round's pause, with what a restarted hub needs to answer the same task: its ids, the round count, how to
    answer (`remote`), and which status it waits in (a later round is a new question)."""
    state: A2aState = {
        "taskId": task.id,
        "contextId": task.context_id,
        "rounds": rounds,
        "remote": round_.remote,
        "waiting": int(task.status.state),
        "statusMessageId": task.status.message.message_id,
    }
    return Pause("a2a", {key: e.id for key, e in zip(round_.keys, round_.elicitations, strict=True)}, state)


def _same_question(resume: Pause, task: Task) -> bool:
    """Whether the task still waits in the round that was asked before the restart (not a later one)."""
    return (
        resume.state.get("waiting") == int(task.status.state)
        and resume.state.get("statusMessageId") == task.status.message.message_id
    )


def _describe(card: AgentCard) -> str:
    lines = [f"Send a message to the A2A agent {card.name}" + (f": {card.description}" if card.description else ".")]
    lines += [f"- {s.name}: {s.description}" if s.description else f"- {s.name}" for s in card.skills]
    return "\n".join(lines)


def _unauthorized(exc: BaseException) -> bool:
    cause = exc.__cause__
    return isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code == 401


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError | httpx.TimeoutException) or "timeout" in type(exc).__name__.lower()


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
