"""`elicithub chat`: a chat REPL against a hub, over HubClient; questions are asked with the terminal prompt. A reply
is printed as the model writes it; its thinking, on a terminal, dimmed on lines of its own (off one, not at all: a
script reading the output gets the answer alone)."""

from __future__ import annotations

import os
import signal
import sys
import webbrowser
from collections.abc import Callable
from typing import Literal

import anyio

from elicithub.clients.hub import (
    ElicitationRequest,
    ElicitationResolved,
    Event,
    HubClient,
    ModelStatus,
    RawEvent,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
)
from elicithub.clients.prompt import Terminal, is_terminal
from elicithub.errors import HubError

Opener = Callable[[str], object]
EXIT_COMMANDS = ("/exit", "/quit")
"""Lines that end the session (as end of input does) instead of being sent to the agent."""
DIM, UNDIM = "\x1b[2m", "\x1b[22m"


def open_browser(url: str) -> object:
    """Open the link where there is a screen to open it on (never a text browser in this very terminal)."""
    if sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return webbrowser.open(url)
    return False


class Chat:
    """One REPL: each line is a message; the reply streams here, and its questions are asked as they come."""

    def __init__(self, hub: HubClient, terminal: Terminal, conversation_id: str | None, opener: Opener) -> None:
        self.hub = hub
        self.terminal = terminal
        self.conversation_id = conversation_id
        self.opener = opener
        self.tools: dict[str, str] = {}
        """Tool names by call id, to name a call that failed."""
        self.waiting: set[str] = set()
        """url questions waiting for a sign-in in the browser; Ctrl-C cancels them."""
        self.dim = sys.stdout.isatty()
        """Whether the model's thinking is shown (dimmed): on a terminal only."""
        self._line: Literal["text", "reasoning"] | None = None
        """What the line being printed holds, piece by piece (None: the cursor is at a line's start)."""

    async def run(self) -> None:
        say = self.terminal.write
        say("elicithub chat: type a message; Ctrl-C cancels a question, /exit, /quit or Ctrl-D (end of input) exits.")
        while True:
            try:
                line = self.terminal.read("you> ").strip()
            except EOFError:
                say("")
                return
            except KeyboardInterrupt:
                say("")
                continue
            if line in EXIT_COMMANDS:
                return
            if line:
                try:
                    await self.reply(line)
                except HubError as exc:
                    say(f"error: {exc}")

    async def reply(self, message: str) -> None:
        with anyio.CancelScope() as reading:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._interrupts, reading)
                async for event in self.hub.chat(message, self.conversation_id):
                    self.conversation_id = self.hub.conversation_id
                    await self._show(event)
                tasks.cancel_scope.cancel()
        self._end_line()

    async def _interrupts(self, reading: anyio.CancelScope) -> None:
        """Ctrl-C while a sign-in is awaited cancels it; otherwise it stops showing this reply."""
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if self.waiting:
                    for elicitation_id in sorted(self.waiting):
                        await self._answer(elicitation_id, "cancel", None)
                else:
                    self.terminal.write("\n(interrupted)")
                    reading.cancel()

    def _piece(self, kind: Literal["text", "reasoning"], text: str) -> None:
        """Print a piece of the reply as it comes, on the line of its kind (the answer never mixed with thinking)."""
        if self._line != kind:
            self._end_line()
            self._line = kind
        sys.stdout.write(f"{DIM}{text}{UNDIM}" if kind == "reasoning" else text)
        sys.stdout.flush()

    def _end_line(self) -> None:
        if self._line is not None:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._line = None

    async def _show(self, event: Event) -> None:
        if isinstance(event, Text):
            self._piece("text", event.text)
            return
        if isinstance(event, Reasoning):
            if self.dim:
                self._piece("reasoning", event.text)
            return
        if isinstance(event, RawEvent) or (isinstance(event, ToolResult) and not event.is_error):
            return  # nothing to print: the line being printed goes on
        self._end_line()
        say = self.terminal.write
        if isinstance(event, ModelStatus):
            say(f"[{event.text}]")
        elif isinstance(event, ToolCall):
            self.tools[event.call_id] = event.name
            say(f"[calling {event.name}]")
        elif isinstance(event, ToolResult):
            say(f"[{self.tools.get(event.call_id, event.call_id)} failed]")
        elif isinstance(event, ElicitationRequest):
            await self._ask(event)
        elif isinstance(event, ElicitationResolved):
            self.waiting.discard(event.elicitation_id)
            say(f"[question {event.outcome}]")

    async def _ask(self, question: ElicitationRequest) -> None:
        say = self.terminal.write
        if not is_terminal():
            # Nobody can answer from a pipe: never wait, say which question was given up.
            say(f"cannot ask {question.message!r} here (stdin is not a terminal); the question is cancelled")
            await self._answer(question.elicitation_id, "cancel", None)
        elif question.mode == "url":
            say(question.message)
            say(f"  Open {question.url}")
            if question.url and self.opener(question.url):
                say("  (opened in your browser)")
            say("  Waiting for you to finish there; Ctrl-C cancels.")
            self.waiting.add(question.elicitation_id)
        else:
            answer = self.terminal.form(question.message, question.requested_schema or {})
            await self._answer(question.elicitation_id, answer.action, answer.content)

    async def _answer(self, elicitation_id: str, action: str, content: dict[str, object] | None) -> None:
        try:
            await self.hub.answer(elicitation_id, action, content)
        except HubError as exc:
            self.terminal.write(f"error: {exc}")


async def chat(url: str, token: str | None, conversation_id: str | None, opener: Opener = open_browser) -> None:
    async with HubClient(url, token=token) as hub:
        await Chat(hub, Terminal(), conversation_id, opener).run()
