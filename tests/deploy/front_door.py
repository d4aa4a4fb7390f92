"""Chats through the front door as a signed-in browser makes them on the AI SDK's UI message stream, followed to the
end of their runs: a stream that ends before its run does (its hub drained) is reattached after the last event read,
as the AI SDK's resume does, and every response's status is noted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.deploy.compose import DEADLINE_S

REGION = {"region": "eu-west-1", "confirm": True}


def deployed(service: str) -> str:
    """What the demo's deploy tool says once the question it asks is answered with REGION."""
    return f"Deployed {service} to eu-west-1 with 2 replicas."


@dataclass
class Chat:
    """A chat asking the demo to deploy `service`, and what came of it."""

    conversation: str
    service: str
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    text: str = ""
    streams: int = 0
    """Streams read: the first, and each reattached after one ended before the run did."""


class FrontDoor:
    def __init__(self, url: str, cookies: httpx.Cookies) -> None:
        headers = {"x-supports-elicitation": "true"}
        timeout = httpx.Timeout(30, read=DEADLINE_S)
        self.http = httpx.AsyncClient(base_url=url, cookies=cookies, headers=headers, timeout=timeout)
        self.statuses: list[tuple[str, int]] = []
        """Each response's request and status, in order."""

    async def close(self) -> None:
        await self.http.aclose()

    def server_errors(self) -> list[tuple[str, int]]:
        return [(request, status) for request, status in self.statuses if status >= 500]

    async def chat(self, chat: Chat, answer_once: asyncio.Event | None = None) -> Chat:
        """Send the chat and read its run to its finish, reattaching as often as its stream ends before; answer its
        question once `answer_once` is set (at once without one)."""
        text = f'/call deploy.deploy_service {{"service": "{chat.service}"}}'
        body = {"id": chat.conversation, "messages": [{"role": "user", "parts": [{"type": "text", "text": text}]}]}
        answering: asyncio.Task[None] | None = None
        last, finished = "", False
        while not finished:
            if chat.streams == 0:
                request = self.http.build_request("POST", "/run/api/chat", json=body)
            else:
                headers = {"last-event-id": last} if last else {}
                request = self.http.build_request("GET", f"/run/api/chat/{chat.conversation}/stream", headers=headers)
            chat.streams += 1
            async for event_id, part in self._parts(request):
                last = event_id or last
                if part["type"] == "data-elicitation-request" and answering is None:
                    answering = asyncio.create_task(self._answer(chat, part["id"], answer_once))
                    chat.asked.set()
                elif part["type"] == "text-delta":
                    chat.text += part["delta"]
                elif part["type"] == "finish":
                    finished = True
        assert answering is not None, f"{chat.conversation} was never asked"
        await answering
        return chat

    async def keep_chatting(self, name: str, stop: asyncio.Event) -> list[Chat]:
        """Chats one after another, each answered at once, until `stop` is set."""
        done = []
        while not stop.is_set():
            done.append(await self.chat(Chat(f"{name}-{len(done)}", f"{name}-{len(done)}")))
        return done

    async def _parts(self, request: httpx.Request) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """A stream's parts with their event ids, until it ends: with the run's finish, or cut short."""
        response = await self.http.send(request, stream=True)
        try:
            self.statuses.append((f"{request.method} {request.url.path}", response.status_code))
            assert response.status_code == 200, f"{request.method} {request.url.path}: {response.status_code}"
            event_id = ""
            async for line in response.aiter_lines():
                if line.startswith("id: "):
                    event_id = line.removeprefix("id: ")
                elif line.startswith("data: ") and line != "data: [DONE]":
                    yield event_id, json.loads(line.removeprefix("data: "))
        except (httpx.RemoteProtocolError, httpx.ReadError):
            return  # the hub went away mid-stream: reattach
        finally:
            await response.aclose()

    async def _answer(self, chat: Chat, elicitation_id: str, when: asyncio.Event | None) -> None:
        if when is not None:
            await when.wait()
        body = {"conversationId": chat.conversation, "elicitationId": elicitation_id, "action": "accept"}
        response = await self.http.post("/run/api/elicitation-responses", json={**body, "content": REGION})
        self.statuses.append(("POST /run/api/elicitation-responses", response.status_code))
        assert response.status_code == 200, response.text
