"""A local stand-in of the Slack Web API on 127.0.0.1: Slack's wire format (form or JSON posts to /api/METHOD,
answers `{"ok": true, ...}`), the bot token checked on every call, every call recorded, messages kept as Slack
keeps them (posted, then edited)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.conftest import ServedInThread

BOT_USER = "UBOT"
TEAM = "T0001"


@dataclass
class Message:
    channel: str
    ts: str
    thread_ts: str | None
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    edits: int = 0

    def buttons(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b.get("type") == "actions" for e in b["elements"]]

    def context(self) -> str:
        return " ".join(e.get("text", "") for b in self.blocks if b.get("type") == "context" for e in b["elements"])


class SlackStandIn:
    def __init__(self, token: str) -> None:
        self.token = token
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.messages: dict[str, Message] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []
        self._lock = threading.RLock()
        self._ts = itertools.count(1)
        app = Starlette(routes=[Route("/api/{method}", self._api, methods=["GET", "POST"])])
        self.served = ServedInThread(app)
        self.port = self.served.port
        self.api_url = f"{self.served.url}/api/"

    def stop(self) -> None:
        self.served.stop()

    # -- what the tests read

    def count(self) -> int:
        with self._lock:
            return len(self.calls)

    def in_thread(self, thread_ts: str) -> list[Message]:
        """The bot's messages in a thread, in the order they were posted."""
        with self._lock:
            return [m for m in self.messages.values() if m.thread_ts == thread_ts]

    def direct_to(self, slack_user: str) -> list[Message]:
        """The bot's top-level messages in its direct messages with one person, in the order they were posted."""
        with self._lock:
            return [m for m in self.messages.values() if m.channel == f"D{slack_user}" and m.thread_ts is None]

    def wait(self, what: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Poll until `what()` is truthy (the hub posts from its own tasks); returns what it returned."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = what()
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"not seen in time; calls so far: {[c[0] for c in self.calls]}")

    # -- the API

    async def _api(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return JSONResponse({"ok": False, "error": "not_authed"})
        params: dict[str, Any] = dict(request.query_params)
        if request.headers.get("content-type", "").startswith("application/json"):
            params.update(await request.json())
        else:
            params.update(dict(await request.form()))
        for key in ("blocks", "view"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        with self._lock:
            self.calls.append((method, params))
            return JSONResponse(self._answer(method, params))

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "team_id": TEAM, "user_id": BOT_USER, "bot_id": "BBOT", "user": "elicithub"}
        if method == "conversations.open":  # a direct message's channel: one per person, as Slack keeps it
            users = str(params.get("users") or "")
            if not users or "," in users:
                return {"ok": False, "error": "invalid_arguments"}
            return {"ok": True, "channel": {"id": f"D{users}"}}
        if method == "chat.postMessage":
            ts = f"{1_700_000_000 + next(self._ts)}.000100"
            thread_ts, blocks = params.get("thread_ts"), params.get("blocks") or []
            message = Message(params["channel"], ts, thread_ts, params["text"], blocks)
            self.messages[ts] = message
            return {"ok": True, "channel": message.channel, "ts": ts, "message": {"text": message.text, "ts": ts}}
        if method == "chat.update":
            found = self.messages.get(params["ts"])
            if found is None:
                return {"ok": False, "error": "message_not_found"}
            found.text, found.blocks, found.edits = params["text"], params.get("blocks") or [], found.edits + 1
            return {"ok": True, "channel": found.channel, "ts": found.ts, "text": found.text}
        if method == "chat.postEphemeral":
            self.ephemerals.append(params)
            return {"ok": True, "message_ts": f"{time.time():.6f}"}
        if method == "views.open":
            if not _fits(params["view"]["blocks"]):
                return {"ok": False, "error": "invalid_arguments"}  # as Slack refuses a view over its limits
            self.views.append(params["view"])
            return {"ok": True, "view": {**params["view"], "id": f"V{len(self.views)}"}}
        return {"ok": False, "error": "unknown_method"}


def _fits(blocks: list[dict[str, Any]]) -> bool:
    """Slack's limits on a view's choice inputs: 100 options a select (10 for checkboxes), option text 75
    characters, option value 150."""
    for block in blocks:
        element = block.get("element") or {}
        options = element.get("options") or []
        most = 10 if element.get("type") == "checkboxes" else 100
        if len(options) > most:
            return False
        for option in [*options, *element.get("initial_options", []), *filter(None, [element.get("initial_option")])]:
            if not 0 < len(option["value"]) <= 150 or len(option["text"]["text"]) > 75:
                return False
    return True
