"""The soak's workload (bench/soak.py): rounds of chats, questions answered, expired and cancelled, approvals,
sign-ins and reconnects with `Last-Event-ID`, each asked on one of two hubs and answered on the other; each round
says what it must have left behind (its question's outcome, what the MCP server provisioned) for soak_checks.py."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.auth.conftest import Browser
from tests.conftest import USERS

TOKENS = {user["id"]: user["token"] for user in USERS}
REQUESTER, APPROVER = "alice", "bob"
"""Alice asks; Bob approves her calls of `mrtr.inventory`, and is the admin who cancels and reads the audit."""
REGION = {"region": "eu-west-1"}
REASON = "not during the freeze"
HELP = "mrtr.provision"
"""In the scripted model's help text, which answers anything that is not a call."""

OnQuestion = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]


class RoundFailed(Exception):
    """A round that did not go as it must: its reason is counted."""


@dataclass
class Round:
    """One round and what it must leave behind."""

    kind: str
    user: str
    conversation: str = ""
    text: str = ""
    question: str | None = None
    """The id of the question it asked, if any."""
    outcome: str | None = None
    """How that question must have ended."""
    audit: str | None = None
    """An approval's outcome in the audit."""
    name: str | None = None
    """The name it provisioned (`mrtr.provision`): provisioned exactly once when accepted, else never."""
    started: float = field(default_factory=time.time)
    ended: float = 0.0
    """`time.monotonic()` when it ended."""


@dataclass
class Tally:
    started: Counter[str] = field(default_factory=Counter)
    finished: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    server_errors: int = 0
    """Responses with a 5xx status: none is expected."""
    provisioned: dict[str, int] = field(default_factory=dict)
    """Each name a round asked to provision, and how many times the MCP server must have done it (0 or 1)."""


async def sse(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """An SSE response's events as (id, data); comments (keep-alives) skipped."""
    event_id, data = "", list[str]()
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield event_id, "\n".join(data)
            event_id, data = "", []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def expect(holds: bool, otherwise: str) -> None:
    if not holds:
        raise RoundFailed(otherwise)


class Workload:
    """Rounds on two hubs, started at a steady rate; `done` gets each round that ended as it must."""

    def __init__(self, hubs: list[str], tracker: str, question_s: float) -> None:
        self.hubs = hubs
        self.tracker = tracker
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(30, read=3 * question_s + 60))
        self.tally = Tally()
        self.done: asyncio.Queue[Round] = asyncio.Queue()
        self._serial = itertools.count()
        self._rounds: dict[str, Callable[[str, str, Round], Awaitable[None]]] = {
            "chat": self.chat,
            "answered": self.answered,
            "reconnect": self.reconnect,
            "expired": self.expired,
            "cancelled": self.cancelled,
            "superseded": self.superseded,
            "admin-cancel": self.admin_cancel,
            "approved": self.approved,
            "denied": self.denied,
            "approval-expired": self.approval_expired,
            "sign-in": self.sign_in,
        }
        self.mix = [
            *("chat", "answered", "reconnect", "approved", "chat", "answered", "expired", "denied"),
            *("reconnect", "cancelled", "superseded", "admin-cancel", "approval-expired"),
        ]
        """The kinds started in turn; sign-ins run one after another beside them."""

    async def close(self) -> None:
        await self.http.aclose()

    async def drive(self, seconds: float, rate: float) -> None:
        """Start `rate` rounds a second for `seconds`; return once every round started has ended."""
        end = time.monotonic() + seconds
        running: set[asyncio.Task[None]] = set()
        signing = asyncio.create_task(self._sign_ins(end, rate))
        for n in itertools.count():
            at = time.monotonic()
            if at >= end:
                break
            task = asyncio.create_task(self.run(self.mix[n % len(self.mix)], n))
            running.add(task)
            task.add_done_callback(running.discard)
            await asyncio.sleep(max(0.0, at + 1 / rate - time.monotonic()))
        await signing
        if running:
            await asyncio.wait(running)

    async def _sign_ins(self, end: float, rate: float) -> None:
        """Sign-ins one after another, each kind's share of `rate` (a sign-in makes the tracker forget every token)."""
        for n in itertools.count():
            at = time.monotonic()
            if at >= end:
                return
            await self.run("sign-in", n)
            await asyncio.sleep(max(0.0, at + len(self.mix) / rate - time.monotonic()))

    async def run(self, kind: str, n: int) -> None:
        """Round `kind`, asked on one hub and answered on the other (they take turns)."""
        user = ("alice", "bob")[n % 2] if kind == "sign-in" else REQUESTER
        ask, answer = self.hubs[n % 2], self.hubs[(n + 1) % 2]
        done = Round(kind, user)
        self.tally.started[kind] += 1
        try:
            await self._rounds[kind](ask, answer, done)
        except (RoundFailed, httpx.HTTPError, AssertionError, KeyError, ValueError) as exc:
            self.tally.errors[f"{kind}: {type(exc).__name__}: {str(exc)[:160]}"] += 1
            if done.name is not None:
                self.tally.provisioned.pop(done.name)  # how it ended is not known
            return
        done.ended = time.monotonic()
        self.tally.finished[kind] += 1
        self.done.put_nowait(done)

    # The rounds.

    async def chat(self, ask: str, answer: str, done: Round) -> None:
        await self._chat(ask, done, "hello")
        expect(HELP in done.text and done.question is None, f"text {done.text[:60]!r}")

    async def answered(self, ask: str, answer: str, done: Round) -> None:
        await self._provision(ask, done, lambda question: self._answer(answer, done, "accept", REGION))
        expect(done.text == f"Provisioned {done.name} in eu-west-1.", f"text {done.text[:80]!r}")
        self._ends(done, "accepted")

    async def expired(self, ask: str, answer: str, done: Round) -> None:
        await self._provision(ask, done, None)
        self._ends(done, "expired")

    async def cancelled(self, ask: str, answer: str, done: Round) -> None:
        await self._provision(ask, done, lambda question: self._answer(answer, done, "cancel"))
        self._ends(done, "cancelled")

    async def admin_cancel(self, ask: str, answer: str, done: Round) -> None:
        async def cancel(question: dict[str, Any]) -> None:
            path = f"{answer}/run/api/admin/questions/{question['elicitationId']}/cancel"
            self._ok(await self.http.post(path, headers=self._headers(APPROVER)))

        await self._provision(ask, done, cancel)
        self._ends(done, "cancelled")

    async def superseded(self, ask: str, answer: str, done: Round) -> None:
        """A new message in a conversation whose run waits cancels its question; the conversation goes on."""

        async def change_mind(question: dict[str, Any]) -> None:
            again = Round(done.kind, done.user, done.conversation)
            await self._chat(answer, again, "hello")
            expect(HELP in again.text, f"text {again.text[:60]!r}")

        await self._provision(ask, done, change_mind)
        self._ends(done, "cancelled")

    async def approved(self, ask: str, answer: str, done: Round) -> None:
        await self._approval(ask, done, lambda _: self._answer(answer, done, "accept", {"approve": True}, APPROVER))
        expect(done.text == "3", f"text {done.text[:80]!r}")
        self._ends(done, "accepted", audit="approved")

    async def denied(self, ask: str, answer: str, done: Round) -> None:
        content = {"approve": False, "reason": REASON}
        await self._approval(ask, done, lambda _: self._answer(answer, done, "accept", content, APPROVER))
        expect(REASON in done.text, f"text {done.text[:80]!r}")
        self._ends(done, "accepted", audit="denied")

    async def approval_expired(self, ask: str, answer: str, done: Round) -> None:
        await self._approval(ask, done, None)
        expect("not approved" in done.text, f"text {done.text[:80]!r}")
        self._ends(done, "expired", audit="expired")

    async def reconnect(self, ask: str, answer: str, done: Round) -> None:
        """A UI message stream left at its question; the answer on the other hub; the rest read there after the
        question's event id."""
        done.name = self._name()
        done.conversation = f"soak-{done.name}"
        call = f'/call mrtr.provision {{"name": "{done.name}"}}'
        body = {"id": done.conversation, "messages": [{"role": "user", "parts": [{"type": "text", "text": call}]}]}
        last = ""
        async with self.http.stream("POST", f"{ask}/run/api/chat", json=body, headers=self._headers(done.user)) as r:
            self._ok(r)
            async for event_id, data in sse(r):
                part = json.loads(data)
                if part["type"] == "data-elicitation-request":
                    last, done.question = event_id, part["id"]
                    break
        expect(done.question is not None, "no question")
        await self._answer(answer, done, "accept", REGION)
        path = f"{answer}/run/api/chat/{done.conversation}/stream"
        parts = []
        async with self.http.stream("GET", path, headers={**self._headers(done.user), "last-event-id": last}) as r:
            self._ok(r)
            async for _, data in sse(r):
                if data == "[DONE]":
                    break
                parts.append(json.loads(data))
        expect(bool(parts) and parts[-1]["type"] == "finish", "the reattached stream did not finish")
        done.text = "".join(p.get("delta", "") for p in parts if p["type"] == "text-delta")
        expect(done.text == f"Provisioned {done.name} in eu-west-1.", f"text {done.text[:80]!r}")
        self._ends(done, "accepted")

    async def sign_in(self, ask: str, answer: str, done: Round) -> None:
        """The tracker forgets every token first, so that each round signs in again, through the loopback OAuth
        server, as a browser does."""
        self._ok(await self.http.post(f"{self.tracker}/debug/revoke-all"))

        async def sign_in(question: dict[str, Any]) -> None:
            browser = Browser(done.user)
            try:
                page = await asyncio.to_thread(browser.sign_in, question["url"])
                expect(page.status_code == 200, f"sign-in page {page.status_code}")
            finally:
                browser.close()

        await self._chat(ask, done, "/call tracker.list_issues {}", sign_in)
        expect(done.text.startswith("You have"), f"text {done.text[:80]!r}")
        self._ends(done, "accepted")

    # What the rounds share.

    def _name(self) -> str:
        return f"db{next(self._serial)}"

    def _headers(self, user: str) -> dict[str, str]:
        return {"authorization": f"Bearer {TOKENS[user]}", "x-supports-elicitation": "true"}

    def _ok(self, response: httpx.Response) -> None:
        if response.status_code >= 500:
            self.tally.server_errors += 1
        expect(response.status_code == 200, f"{response.request.method} {response.url.path}: {response.status_code}")

    def _ends(self, done: Round, outcome: str, audit: str | None = None) -> None:
        expect(done.question is not None, "no question")
        done.outcome, done.audit = outcome, audit
        if done.name is not None:
            self.tally.provisioned[done.name] = 1 if outcome == "accepted" else 0

    async def _provision(self, ask: str, done: Round, on_question: OnQuestion | None) -> None:
        done.name = self._name()
        self.tally.provisioned[done.name] = 0
        await self._chat(ask, done, f'/call mrtr.provision {{"name": "{done.name}"}}', on_question)

    async def _approval(self, ask: str, done: Round, on_question: OnQuestion | None) -> None:
        await self._chat(ask, done, f'/call mrtr.inventory {{"name": "{self._name()}"}}', on_question)

    async def _answer(
        self, hub: str, done: Round, action: str, content: dict[str, Any] | None = None, user: str | None = None
    ) -> None:
        body: dict[str, Any] = {"elicitationId": done.question, "action": action}
        if user is None:
            body["conversationId"] = done.conversation
        if content is not None:
            body["content"] = content
        headers = self._headers(user or done.user)
        self._ok(await self.http.post(f"{hub}/run/api/elicitation-responses", json=body, headers=headers))

    async def _chat(self, hub: str, done: Round, text: str, on_question: OnQuestion | None = None) -> None:
        """A chat on the OpenAI-compatible endpoint read to `[DONE]`: its text in `done.text`; the first question
        (or approval) it shows in `done.question`, handed to `on_question` as it comes."""
        headers = self._headers(done.user)
        if done.conversation:
            headers["x-conversation-id"] = done.conversation
        body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": text}]}
        handling: list[asyncio.Task[None]] = []
        finished = False
        async with self.http.stream("POST", f"{hub}/run/v1/chat/completions", json=body, headers=headers) as r:
            self._ok(r)
            done.conversation = r.headers["x-conversation-id"]
            async for _, data in sse(r):
                if data == "[DONE]":
                    finished = True
                    break
                choices = json.loads(data)["choices"]
                content = choices[0]["delta"].get("content") if choices else None
                if not content:
                    continue
                if not content.startswith('{"type": '):
                    done.text += content
                    continue
                event = json.loads(content)
                if event["type"] in ("elicitation-request", "approval-pending") and done.question is None:
                    done.question = event["elicitationId"]
                    if on_question is not None:
                        handling.append(asyncio.create_task(on_question(event)))
        for task in handling:
            await task
        expect(finished, "the stream ended before [DONE]")
