"""`POST /run/agui`: the hub's agents as AG-UI 1.0 agents, their questions as the protocol's interrupts.

`POST /run/agui/{agent}` runs that agent, `POST /run/agui` the default one (a name that is no agent's means the
default, as the chat surfaces' `model` and `agent` do). A `RunAgentInput`'s `threadId` is the conversation (per
user, as conversation ids are). A run streams until it pauses on questions, then ends: a `MESSAGES_SNAPSHOT`, then
`RUN_FINISHED` with one interrupt per open question (agui_interrupts.py). The next input on the thread resumes them
by AG-UI's contract rules, which differ from the chat surfaces' on purpose: one `resume` covers every open
interrupt, or nothing is taken and the run ends in `RUN_ERROR` with the interrupts still open; the continuation
then streams on that request. Where a round paused (the hub's run, the log position after its pause, the call it
paused in) is kept in the hub's store, so any instance takes its resume. The input's front-end tools are offered to
the model for the run; a call of one ends it (agui_events.py names the call pending), and the next input's `tool`
messages continue the thread (agui_client.py). What /openapi.json says of these routes is in agui_openapi.py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass

from ag_ui.core import BaseEvent, ResumeEntry, RunAgentInput, ToolMessage, UserMessage
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from elicithub.core import jsoncodec
from elicithub.core.elicitation import Answer, Elicitation
from elicithub.core.events import RunFinished, RunPaused
from elicithub.core.ids import check_conversation_id
from elicithub.core.ports import KeyValueStore
from elicithub.errors import (
    AlreadyResolved,
    ElicitationNotFound,
    Expired,
    HubError,
    IdentityUnavailable,
    InvalidContent,
    ToolCallNotFound,
)
from elicithub.runtime.conversations import Caller, Conversations
from elicithub.surfaces.chat import AGUI_PATHS
from elicithub.surfaces.chat.agui_client import offered, results
from elicithub.surfaces.chat.agui_events import AguiWriter, history, words
from elicithub.surfaces.chat.agui_interrupts import BadPayload, answer_of, interrupt
from elicithub.surfaces.gates import Bearer, bearer_token
from elicithub.surfaces.pauses import ends_with_sign_in
from elicithub.surfaces.streaming import OpenStreams, SSEResponse


class _Refused(HubError):
    """A `RunAgentInput` that does not conform: its RUN_ERROR's `code` and message. Nothing of it was taken."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Interrupted:
    """Where a run ended on interrupts (or, for a new message, starts): the thread, the hub's run, the log position
    its stream goes on after, and the call it paused in."""

    thread_id: str
    run_id: str
    after: int
    tool_call_id: str | None


class AguiSurface:
    def __init__(
        self,
        conversations: Conversations,
        kv: KeyValueStore,
        bearer: Bearer,
        streams: OpenStreams,
        *,
        keepalive_s: float,
        retention_s: float,
        agent_of: Callable[[str | None], str],
    ) -> None:
        """`agent_of`: the id of the hub's agent a path's name (None: none) picks; `retention_s`: how long a
        thread's interrupts are kept."""
        self.conversations = conversations
        self.kv = kv
        self.bearer = bearer
        self.streams = streams
        self.keepalive_s = keepalive_s
        self.retention_s = retention_s
        self.agent_of = agent_of
        self._routes: list[BaseRoute] = [
            Route(path, self.endpoint, methods=["POST"], include_in_schema=False) for path in AGUI_PATHS
        ]

    @property
    def routes(self) -> list[BaseRoute]:
        return self._routes

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        yield

    async def endpoint(self, request: Request) -> Response:
        """Who sends it (a bearer token of a hub user, else 401 and no stream), the input, then its run's stream."""
        token = bearer_token(request.headers.get("authorization"))
        try:
            user = await self.bearer.authenticate(token) if token is not None else None
        except IdentityUnavailable as exc:
            return _error(503, exc.code, str(exc))
        if user is None:
            challenge = self.bearer.challenge(invalid_token=token is not None)
            message = "A bearer token of one of the hub's users is needed."
            return _error(401, "unauthorized", message, {"www-authenticate": challenge})
        try:
            raw = jsoncodec.loads(await request.body())
        except ValueError as exc:  # not JSON, or a number JSON cannot carry
            return _error(422, "bad_request", f"body: {exc}")
        try:
            given = RunAgentInput.model_validate(raw)
            check_conversation_id(given.thread_id)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
            return _error(422, "bad_request", problems)
        except HubError as exc:
            return _error(422, exc.code, f"threadId: {exc}")
        caller = Caller(user, supports_elicitation=True, surface="agui")
        frames = self._frames(caller, given, self.agent_of(request.path_params.get("agent")))
        return SSEResponse(frames, keepalive_s=self.keepalive_s, headers={}, streams=self.streams)

    async def _frames(
        self, caller: Caller, given: RunAgentInput, agent: str
    ) -> AsyncGenerator[tuple[bytes, bool], None]:
        encoder = EventEncoder()

        def frame(events: list[BaseEvent], last: bool = False) -> tuple[bytes, bool]:
            return "".join(encoder.encode(e) for e in events).encode(), last

        writer = AguiWriter(given.thread_id, given.run_id)
        yield frame(writer.start())
        try:
            start = await self._take(caller, given, agent)
        except HubError as exc:  # _Refused, or what the hub refuses itself: nothing of the input was taken
            yield frame(writer.error(exc.code, str(exc)), last=True)
            return
        writer.call = start.tool_call_id
        following = await self.conversations.follow(caller, given.thread_id, start.run_id, start.after)
        async with contextlib.aclosing(following.events) as events:
            async for seq, event in events:
                if isinstance(event, RunPaused):
                    questions = await self.conversations.open_questions(caller, event.elicitation_ids)
                    if not questions:
                        continue  # answered already (a replayed resume reads the run on)
                    await self._keep(caller, Interrupted(given.thread_id, start.run_id, seq, writer.call), questions)
                    transcript = await self.conversations.transcript(caller, given.thread_id)
                    interrupts = [interrupt(q, writer.call) for q in questions]
                    yield frame(writer.interrupted(transcript, interrupts), last=True)
                    return
                written = writer.write(event)
                if isinstance(event, RunFinished):
                    yield frame(written, last=True)
                    return
                if written:
                    yield frame(written)
        # The hub stops before the run ends (it goes on on another hub sharing the store): AG-UI has no way back into
        # a run's stream, so the client is told this one ended without the run.
        yield frame(writer.error("stream_ended", "The hub stopped before this run ended."), last=True)

    # -- what an input asks: a new message, or a resume

    async def _take(self, caller: Caller, given: RunAgentInput, agent: str) -> Interrupted:
        """Take the input (nothing when it does not conform): where its stream follows the hub's run from. A resume
        goes on with the run it resumes, whichever agent's; a new message, or the results of the calls a run handed
        over to the client, start a run of `agent`, offered the input's tools and told its context."""
        if not given.resume:
            self.conversations.shed()  # before the thread's interrupts are read: an overloaded hub answers at once
        open_ids = [e.id for e in await self.conversations.open_questions(caller, await self._open(caller, given))]
        if given.resume:
            return await self._resume(caller, given.thread_id, given.resume, open_ids)
        if open_ids:
            raise _Refused(
                "interrupts_pending",
                f"This thread has {len(open_ids)} open interrupt(s) ({', '.join(open_ids)}): "
                "send a resume that addresses every one.",
            )
        try:
            client = offered(given.tools, given.context)
        except ValueError as exc:
            raise _Refused("invalid_payload", str(exc)) from None
        last = given.messages[-1] if given.messages else None
        if isinstance(last, ToolMessage):  # the results of the calls the last run handed over to the client
            try:
                sent = await self.conversations.send_results(
                    caller, given.thread_id, results(given.messages), agent=agent, client=client
                )
            except ToolCallNotFound as exc:
                raise _Refused("unknown_tool_call", str(exc)) from None
        elif isinstance(last, UserMessage):
            told = history(given.messages[:-1])  # taken only when the hub does not know the thread yet
            text = words(last.content)
            sent = await self.conversations.send(
                caller, given.thread_id, text, agent=agent, history=told, client=client
            )
        else:
            raise _Refused("invalid_payload", "messages: the last message must be from the user, or a tool's result.")
        return Interrupted(given.thread_id, sent.run_id, sent.after, None)

    async def _resume(
        self, caller: Caller, thread_id: str, entries: Sequence[ResumeEntry], open_ids: list[str]
    ) -> Interrupted:
        """Every entry is checked before any is taken (AG-UI rules 2-8); a replay of one taken is taken again as
        the same answer (the broker's idempotent repeat), and its stream reads the run on from the same pause.
        Payloads that do not fit are refused together, every field of every entry named, so that a client fixes
        them all in one round trip."""
        ids = [e.interrupt_id for e in entries]
        if len(set(ids)) != len(ids):
            raise _Refused("invalid_payload", "resume: each interrupt is addressed once.")
        answers: list[tuple[Elicitation, Answer]] = []
        where: list[Interrupted] = []
        unfit: dict[str, list[str]] = {}  # by interrupt: its payload's problems, each `field: message`
        for entry in entries:
            interrupted = await self._interrupted(caller, entry.interrupt_id)
            if interrupted is None or interrupted.thread_id != thread_id:
                raise _unknown(entry.interrupt_id)
            try:
                question = await self.conversations.question(caller, entry.interrupt_id)
                answer = answer_of(question, entry)
                await self.conversations.check(caller, question.id, answer)
            except ElicitationNotFound:
                raise _unknown(entry.interrupt_id) from None
            except InvalidContent as exc:  # the content does not fit the question's schema
                unfit[entry.interrupt_id] = [f"{e.field}: {e.message}" for e in exc.errors]
                continue
            except BadPayload as exc:  # the payload does not fit the interrupt's shape
                unfit[entry.interrupt_id] = exc.errors
                continue
            except Expired:
                raise _Refused("expired", f"Interrupt {entry.interrupt_id} has expired.") from None
            except HubError as exc:
                raise _Refused(exc.code, str(exc)) from None
            answers.append((question, answer))
            where.append(interrupted)
        if unfit:
            raise _Refused(
                "invalid_payload", " ".join(f"resume payload for {i}: {'; '.join(p)}." for i, p in unfit.items())
            )
        missing = [i for i in open_ids if i not in ids]
        if missing:
            raise _Refused("resume_incomplete", f"resume: address every open interrupt (missing {', '.join(missing)}).")
        for question, answer in answers:
            if ends_with_sign_in(question, answer):
                continue  # it ends when the person's sign-in does: the stream waits for that
            # Answered meanwhile (elsewhere, or this same resume before), or ended since it was checked: the run
            # goes on with that.
            with contextlib.suppress(AlreadyResolved, Expired):
                await self.conversations.answer(caller, question.id, answer, thread_id)
        return min(where, key=lambda w: w.after)  # a replay of an earlier round reads the run on from there

    # -- where runs ended on interrupts, in the hub's store

    @staticmethod
    def _thread_key(caller: Caller, thread_id: str) -> str:
        return f"agui-thread:{caller.user_id}:{thread_id}"

    @staticmethod
    def _interrupt_key(caller: Caller, interrupt_id: str) -> str:
        # Scoped to the user: another user's interrupt id is unknown here.
        return f"agui-interrupt:{caller.user_id}:{interrupt_id}"

    async def _keep(self, caller: Caller, interrupted: Interrupted, questions: list[Elicitation]) -> None:
        """Before the interrupts are sent: a resume may reach any instance as soon as the client reads them."""
        record = json.dumps(asdict(interrupted)).encode()
        for question in questions:
            await self.kv.put(self._interrupt_key(caller, question.id), record, self.retention_s)
        ids = json.dumps([q.id for q in questions]).encode()
        await self.kv.put(self._thread_key(caller, interrupted.thread_id), ids, self.retention_s)

    async def _open(self, caller: Caller, given: RunAgentInput) -> list[str]:
        """The interrupts the thread's last round raised (some may have ended since)."""
        kept = await self.kv.get(self._thread_key(caller, given.thread_id))
        return [str(i) for i in json.loads(kept)] if kept is not None else []

    async def _interrupted(self, caller: Caller, interrupt_id: str) -> Interrupted | None:
        kept = await self.kv.get(self._interrupt_key(caller, interrupt_id))
        return Interrupted(**json.loads(kept)) if kept is not None else None


def _unknown(interrupt_id: str) -> _Refused:
    return _Refused("unknown_interrupt", f"No interrupt {interrupt_id} was raised on this thread for you.")


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)
