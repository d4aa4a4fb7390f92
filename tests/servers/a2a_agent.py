"""A downstream A2A agent built on a2a-sdk 1.3 (executor, DefaultRequestHandler, InMemoryTaskStore, JSON-RPC routes).

The first word of the first message picks what it does:
- `plain`: asks "Which city are you flying from?" in words (input-required), then books from there;
- `form`: asks as another hub would, with an `elicitation` data part (id `remote-eli-1`) holding a flat schema;
- `auth`: waits in auth-required with a sign-in link (out of band: `GET /signin?task=ID` lets it go on);
- `told`: waits in auth-required with a sign-in link like `auth`, but goes on only once a message on the task says
  the sign-in is done (`told hold`: and only after `GET /release?task=ID` as well, in auth-required meanwhile);
- `again`: asks in every round, for ever;
- `slow`: never answers;
- anything else: answers at once.

`python a2a_agent.py PORT [TOKEN]`: with TOKEN, JSON-RPC calls need `Authorization: Bearer TOKEN`, or any bearer
token when TOKEN is `*` (the card stays public). With `$A2A_BINDING=rest` it speaks HTTP+JSON under `/rest`
instead of JSON-RPC. `GET /debug/log` lists the calls it served (with each message's text and data parts);
`/debug/responses` the `elicitationResponse`s it got; `/debug/traceparents` the W3C trace contexts its requests
carried; `GET /release?task=ID` lets a `told hold` task go on.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import uvicorn
from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

PORT = int(sys.argv[1])
TOKEN = sys.argv[2] if len(sys.argv) > 2 else None
REST = os.environ.get("A2A_BINDING") == "rest"

TRAVELLERS = {
    "type": "object",
    "properties": {
        "travellers": {"type": "integer", "title": "Travellers", "minimum": 1, "maximum": 9},
        "cabin": {"type": "string", "title": "Cabin", "enum": ["economy", "business"]},
    },
    "required": ["travellers", "cabin"],
}

calls: list[dict[str, Any]] = []
responses: list[dict[str, Any]] = []
signed_in: dict[str, asyncio.Event] = {}
released: dict[str, asyncio.Event] = {}
traceparents: list[str] = []


class Travel(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None and context.task_id is not None and context.context_id is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        first = get_message_text(task.history[0]) if task.history else get_message_text(context.message)
        kind = first.split()[0] if first.split() else ""
        follow_up = context.current_task is not None
        if kind == "plain":
            if not follow_up:
                await updater.requires_input(
                    updater.new_agent_message([new_text_part("Which city are you flying from?")])
                )
                return
            city = get_message_text(context.message)
            await updater.add_artifact([new_text_part(f"Booked a trip from {city}.")])
            await updater.complete(updater.new_agent_message([new_text_part("Your trip is booked.")]))
        elif kind == "form":
            if not follow_up:
                question = {
                    "elicitationId": "remote-eli-1",
                    "mode": "form",
                    "message": "How many travellers, in which cabin?",
                    "requestedSchema": TRAVELLERS,
                }
                parts = [
                    new_text_part("How many travellers, in which cabin?"),
                    new_data_part({"elicitation": question}),
                ]
                await updater.requires_input(updater.new_agent_message(parts))
                return
            answer = next(d["elicitationResponse"] for d in get_data_parts(context.message.parts))
            responses.append(answer)
            if answer["action"] != "accept":
                await updater.complete(updater.new_agent_message([new_text_part("No booking made.")]))
                return
            content = answer["content"]
            booked = f"Booked {int(content['travellers'])} travellers in {content['cabin']}."
            await updater.complete(updater.new_agent_message([new_text_part(booked)]))
        elif kind == "auth":
            event = signed_in.setdefault(context.task_id, asyncio.Event())
            link = f"http://127.0.0.1:{PORT}/signin?task={context.task_id}"
            await updater.requires_auth(updater.new_agent_message([new_text_part(f"Sign in to Travel at {link}")]))
            await event.wait()  # out of band: this execute() goes on once the person has signed in
            await updater.start_work()
            await updater.complete(updater.new_agent_message([new_text_part("Signed in; your trip is booked.")]))
        elif kind == "told":
            if not follow_up:
                link = f"http://127.0.0.1:{PORT}/signin?task={context.task_id}"
                await updater.requires_auth(updater.new_agent_message([new_text_part(f"Sign in to Travel at {link}")]))
                return
            if not any(isinstance(d, dict) and "authCompleted" in d for d in get_data_parts(context.message.parts)):
                await updater.failed(updater.new_agent_message([new_text_part("That does not say you signed in.")]))
                return
            if "hold" in first.split():
                await released.setdefault(context.task_id, asyncio.Event()).wait()
            await updater.start_work()
            await updater.complete(updater.new_agent_message([new_text_part("Told; your trip is booked.")]))
        elif kind == "slow":
            await asyncio.Event().wait()
        elif kind == "again":
            await updater.requires_input(updater.new_agent_message([new_text_part("Anything else?")]))
        else:
            await updater.complete(updater.new_agent_message([new_text_part(f"You said: {first}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class Recording(DefaultRequestHandler):  # type: ignore[misc,valid-type]
    """The SDK's handler, noting each call it serves."""

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        calls.append(
            {
                "method": "SendMessage",
                "taskId": params.message.task_id,
                "text": get_message_text(params.message),
                "data": get_data_parts(list(params.message.parts)),
                "authorization": context.state.get("headers", {}).get("authorization"),
            }
        )
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        calls.append({"method": "GetTask", "taskId": params.id})
        result: Task | None = await super().on_get_task(params, context)
        return result

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        calls.append({"method": "CancelTask", "taskId": params.id})
        result: Task | None = await super().on_cancel_task(params, context)
        return result

    def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        calls.append({"method": "SubscribeToTask", "taskId": params.id})
        stream: AsyncGenerator[Event, None] = super().on_subscribe_to_task(params, context)
        return stream


CARD = AgentCard(
    name="Travel",
    description="Books trips, and asks what it needs to know.",
    version="1.0.0",
    supported_interfaces=[
        AgentInterface(url=f"http://127.0.0.1:{PORT}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0")
        if REST
        else AgentInterface(url=f"http://127.0.0.1:{PORT}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
    ],
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[AgentSkill(id="book", name="Book a trip", description="Flights and hotels.", tags=["travel"])],
)


async def sign_in(request: Request) -> Response:
    signed_in.setdefault(request.query_params["task"], asyncio.Event()).set()
    return PlainTextResponse("Signed in to Travel; you can close this window.")


async def release(request: Request) -> Response:
    released.setdefault(request.query_params["task"], asyncio.Event()).set()
    return PlainTextResponse("Released.")


async def debug_log(request: Request) -> Response:
    return JSONResponse(calls)


async def debug_responses(request: Request) -> Response:
    return JSONResponse(responses)


async def debug_traceparents(request: Request) -> Response:
    return JSONResponse(traceparents)


def guarded(app: Any) -> Callable[..., Awaitable[None]]:
    """With a TOKEN, the JSON-RPC endpoint wants it as a bearer token. Every W3C `traceparent` is noted."""

    async def guard(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (traceparent := dict(scope["headers"]).get(b"traceparent")):
            traceparents.append(traceparent.decode())
        if TOKEN and scope["type"] == "http" and scope["path"].startswith(("/a2a", "/rest")):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if given != f"Bearer {TOKEN}".encode() and not (TOKEN == "*" and given.startswith(b"Bearer ")):
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guard


handler = Recording(Travel(), InMemoryTaskStore(), CARD)
app = Starlette(
    routes=[
        *create_agent_card_routes(CARD),
        *(create_rest_routes(handler, path_prefix="/rest") if REST else create_jsonrpc_routes(handler, "/a2a")),
        Route("/signin", sign_in),
        Route("/release", release),
        Route("/debug/log", debug_log),
        Route("/debug/responses", debug_responses),
        Route("/debug/traceparents", debug_traceparents),
    ]
)

if __name__ == "__main__":
    uvicorn.run(guarded(app), host="127.0.0.1", port=PORT, log_level="warning")
