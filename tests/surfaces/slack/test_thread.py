"""A reply streams into its thread the way Slack apps do: posted with its first text, edited as it grows (not once
per token), complete when the stretch of text ends; shown again after a restart, it edits the same message."""

from __future__ import annotations

import asyncio

from slack_sdk.web.async_client import AsyncWebClient

from elicithub.store import open_backend
from elicithub.surfaces.slack.records import SlackRecords, Thread
from elicithub.surfaces.slack.thread import Reply
from tests.surfaces.slack.conftest import ALICE, BOT_TOKEN, CHANNEL
from tests.surfaces.slack.standin import SlackStandIn

THREAD = Thread("T0001", CHANNEL, "1600000000.000100", ALICE)
TOKENS = [f"word{i} " for i in range(300)]


def test_a_streamed_reply_is_one_message_edited_at_a_slack_rate(standin: SlackStandIn) -> None:
    async def stream() -> None:
        backend = open_backend("memory://")
        records = SlackRecords(backend.kv, 60)
        client = AsyncWebClient(token=BOT_TOKEN, base_url=standin.api_url)
        reply = Reply(client, records, THREAD, "run_1", 0)
        for token in TOKENS:
            await reply.add(token)
        await reply.flush()
        # The same run shown again (a restart replays its events): the message is edited, not posted again.
        again = Reply(client, records, THREAD, "run_1", 0)
        await again.add("".join(TOKENS) + "& <done>")
        await again.flush()
        await backend.close()

    asyncio.run(stream())
    [message] = standin.in_thread(THREAD.thread_ts)
    assert message.text == "".join(TOKENS) + "&amp; &lt;done&gt;"
    methods = [c[0] for c in standin.calls]
    assert methods.count("chat.postMessage") == 1
    assert methods.count("chat.update") < len(TOKENS) // 10  # edited now and then, never per token
