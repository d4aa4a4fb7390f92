"""The `travel` demo A2A agent (a2a-sdk 1.3): it books a flight, and first asks where you fly from.

A follow-up question the A2A way: the task goes to `TASK_STATE_INPUT_REQUIRED` with the question in words, and the
next message on the task is the answer. The hub turns that into a question in the chat.
"""

from __future__ import annotations

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette

QUESTION = "Which city are you flying from?"


class TravelAgent(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.start_work()
            await updater.requires_input(updater.new_agent_message([new_text_part(QUESTION)]))
            return
        trip = task.history[0].parts[0].text if task.history and task.history[0].parts else "your destination"
        origin = context.get_user_input().strip() or "somewhere"
        await updater.start_work()
        await updater.add_artifact([new_text_part(f"Booked a flight from {origin} for: {trip}.")], name="booking")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def travel_app(base_url: str) -> Starlette:
    """The agent card at `/.well-known/agent-card.json` and JSON-RPC at `/a2a`, under `base_url`."""
    card = AgentCard(
        name="Travel",
        description="Books flights. Tell it where and when; it asks where you fly from.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base_url}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="book", name="Book a flight", description="Books a flight.", tags=["travel"])],
    )
    handler = DefaultRequestHandler(TravelAgent(), InMemoryTaskStore(), card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")])
