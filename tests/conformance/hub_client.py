"""The hub as the client of an MCP conformance scenario: `python hub_client.py SERVER_URL`.

The scenario's server is given to the hub as a downstream 2025-11-25 server; each of its tools is called once,
and every question the hub is asked is accepted as shown (its defaults left as they are), as a person would.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from elicithub.config import McpServerConfig
from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, Elicitation
from elicithub.core.events import RunPaused, StreamEvent
from elicithub.runtime.asker import Asker
from elicithub.runtime.tools import CallContext
from elicithub.store import MemoryElicitations
from elicithub.triggers.mcp import McpShared, downstream_client, mcp_triggers


class Unseen:
    async def publish(self, elicitation: Elicitation, event: StreamEvent) -> None:
        return None


async def main(url: str) -> int:
    broker = Broker(MemoryElicitations(), Unseen())
    await broker.start()
    http = downstream_client(30)
    server = McpServerConfig(id="scenario", url=url, protocol="legacy")
    [trigger] = mcp_triggers([server], McpShared(broker, http, 30, 5))
    answering: set[asyncio.Task[Any]] = set()

    async def accept_as_shown(event: StreamEvent) -> None:
        if isinstance(event, RunPaused):
            for elicitation_id in event.elicitation_ids:
                task = asyncio.create_task(broker.respond(elicitation_id, Answer("accept", {}), "person"))
                answering.add(task)
                task.add_done_callback(answering.discard)

    failed = 0
    try:
        for tool in await trigger.list_tools(None):
            asker = Asker(broker, emit=accept_as_shown)
            context = CallContext("conv_scenario", f"run_{tool.name}", "person", True, asker)
            outcome = await trigger.call(tool.name, {}, context)
            print(f"{tool.name}: {outcome.text}")
            failed += outcome.is_error
    finally:
        await trigger.close()
        await http.aclose()
        await broker.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
