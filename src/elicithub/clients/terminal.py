"""`elicithub chat`: a chat REPL against a hub, over HubClient; questions are asked with the terminal prompt."""

from __future__ import annotations

import os
import signal
import sys
import webbrowser
from collections.abc import Callable

import anyio

from elicithub.clients.hub import ElicitationRequest, ElicitationResolved, Event, HubClient, Text, ToolCall, ToolResult
from elicithub.clients.prompt import Terminal, is_terminal
from elicithub.errors import HubError

Opener = Callable[[str], object]
EXIT_COMMANDS = ("/exit", "/quit")
"""Lines that end the session (as end of input does) instead of being sent to the agent."""


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
        self.terminal.write("")

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

    async def _show(self, event: Event) -> None:
        say = self.terminal.write
        if isinstance(event, Text):
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, ToolCall):
            self.tools[event.call_id] = event.name
            say(f"[calling {event.name}]")
        elif isinstance(event, ToolResult) and event.is_error:
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
