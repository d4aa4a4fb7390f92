"""A sign-in asked of an A2A client: the task goes to auth-required with the link, the stream stays open, and after
the sign-in completes out of band the task goes on by itself (A2A 1.0 §7.6.1)."""

from __future__ import annotations

import asyncio

from a2a.helpers import get_data_parts
from a2a.types import SendMessageRequest

from tests.auth.conftest import Browser, TrackerProcess
from tests.conftest import RunningHub
from tests.surfaces.a2a.test_agent import a2a_client, label, message


def test_auth_required_goes_on_after_the_sign_in_without_another_message(
    auth_hub: RunningHub, tracker: TrackerProcess, browser: Browser
) -> None:
    async def go() -> list[str]:
        seen: list[str] = []
        async with a2a_client(auth_hub, streaming=True) as client:
            async for event in client.send_message(SendMessageRequest(message=message("/call tracker.list_issues {}"))):
                seen.append(label(event))
                if seen[-1] == "TASK_STATE_AUTH_REQUIRED":
                    status = event.task.status if event.HasField("task") else event.status_update.status
                    [data] = get_data_parts(list(status.message.parts))
                    asked = data["elicitation"]
                    assert asked["mode"] == "url" and asked["context"]["serverId"] == "tracker"
                    # The person signs in elsewhere (a browser); nothing is sent on the task.
                    await asyncio.to_thread(browser.sign_in, asked["url"])
        return seen

    seen = asyncio.run(go())
    auth_required = seen.index("TASK_STATE_AUTH_REQUIRED")
    assert seen[auth_required + 1] == "TASK_STATE_WORKING"
    assert seen[-1] == "TASK_STATE_COMPLETED"
    assert seen[-2].startswith("artifact:You have 3 issues")
    assert tracker.stats()["toolCalls"]["list_issues"] >= 1
