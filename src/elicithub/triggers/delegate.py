"""Delegation: an agent named in another's tools is the tool `AGENT.delegate {"message"}`, run as a child run.

The child runs inside the parent's tool call, with its own record (`parent_run_id`), model turns and tools. Its
questions are its own (its own elicitation ids, asked through its own calls' askers) and show on the stream the
person follows, with `context.agentPath`. The parent's call records which child it waits on, so after a restart
the parent's resumed call continues that child from where it stopped instead of starting another.
"""

from __future__ import annotations

import time

from elicithub.config import AgentConfig
from elicithub.core.elicitation import new_id
from elicithub.core.jsoncodec import JsonObject
from elicithub.core.ports import RunStore
from elicithub.core.runs import CHILD_RUN, RunRecord
from elicithub.runtime.loop import last_words
from elicithub.runtime.models import ToolSpec
from elicithub.runtime.tools import CallContext, ToolOutcome

TOOL = "delegate"
SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What to ask the agent."}},
    "required": ["message"],
}


class DelegateTrigger:
    """One agent, offered to others as a tool; the runner runs the child run (the call's `run_child`)."""

    def __init__(self, agent: AgentConfig, runs: RunStore) -> None:
        self.agent = agent
        self.runs = runs

    @property
    def prefix(self) -> str:
        return self.agent.id

    async def list_tools(self, context: CallContext | None) -> list[ToolSpec]:
        description = self.agent.description or f"Ask the {self.agent.id} agent to do something; it may ask you."
        return [ToolSpec(TOOL, description, SCHEMA)]

    async def call(self, tool: str, arguments: JsonObject, context: CallContext) -> ToolOutcome:
        message = arguments.get("message")
        if tool != TOOL or not isinstance(message, str) or not message.strip():
            return ToolOutcome(f'{self.agent.id}.{TOOL} takes {{"message": string}}.', is_error=True)
        run_child = context.run_child
        assert run_child is not None, "the runner hands every call its run_child"
        resume = context.asker.resume_from() if context.asker is not None else None
        child = None
        if resume is not None and resume.trigger == "delegate" and resume.child_run_id is not None:
            child = await self.runs.get(resume.child_run_id)
        if child is not None and child.status == "finished":
            return ToolOutcome(last_words(child.messages))
        if child is not None:
            return await run_child(child, context, True)
        child = RunRecord(
            new_id("run"),
            context.conversation_id,
            context.user_id,
            context.supports_elicitation,
            [{"role": "user", "content": message}],
            parent_run_id=context.calling_run,
            agent=self.agent.id,
            updated_at=time.time(),
            surface=context.surface,
            modes=sorted(context.modes),
        )
        await self.runs.save(child)
        if context.asker is not None:
            await context.asker.checkpoint("delegate", {CHILD_RUN: child.run_id})
        return await run_child(child, context, False)

    async def close(self) -> None:
        return None
