"""A reply streams into its thread the way Slack apps do: posted with its first text, edited as it grows (not once
per token), complete when the stretch of text ends; shown again after a restart, it edits the same message.
(Replies of a run's model turns as a hub streams them: test_streaming.py.)"""

from __future__ import annotations

import asyncio
import logging

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from elicithub.store import open_backend
from elicithub.surfaces.slack.records import SlackRecords, Thread
from elicithub.surfaces.slack.thread import Reply
from tests.core_fixtures import until
from tests.surfaces.slack.conftest import ALICE, BOT_TOKEN, CHANNEL
from tests.surfaces.slack.standin import SlackStandIn

THREAD = Thread("T0001", CHANNEL, "1600000000.000100", ALICE)
TOKENS = [f"word{i} " for i in range(300)]


def test_a_reply_shown_again_edits_its_message_instead_of_posting_twice(standin: SlackStandIn) -> None:
    async def stream() -> None:
        backend = open_backend("memory://")
        records = SlackRecords(backend.kv, 60)
        client = AsyncWebClient(token=BOT_TOKEN, base_url=standin.api_url)
        reply = Reply(client, records, THREAD, "run_1", 0, interval_s=3600)
        for token in TOKENS:
            reply.add(token)
        await reply.end()
        # The same run shown again (a restart replays its events): the message is edited, not posted again.
        again = Reply(client, records, THREAD, "run_1", 0)
        again.add("".join(TOKENS) + "& <done>")
        await again.end()
        await backend.close()

    asyncio.run(stream())
    [message] = standin.in_thread(THREAD.thread_ts)
    assert message.text == "".join(TOKENS) + "&amp; &lt;done&gt;"
    # Every token came before Slack was first called: one post of them all; the replay edits it.
    assert [c[0] for c in standin.calls] == ["chat.postMessage", "chat.update"]


def test_an_edit_slack_refuses_mid_stream_is_made_good_when_the_reply_ends(
    standin: SlackStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    async def stream() -> None:
        backend = open_backend("memory://")
        client = AsyncWebClient(token=BOT_TOKEN, base_url=standin.api_url)
        reply = Reply(client, SlackRecords(backend.kv, 60), THREAD, "run_2", 0, interval_s=0)
        reply.add("Hello")
        await until(lambda: bool(standin.in_thread(THREAD.thread_ts)))
        client.token = "xoxb-revoked"  # Slack refuses the next edit
        with caplog.at_level(logging.WARNING, "elicithub.surfaces.pacing"):
            reply.add(" world")
            await until(lambda: any("paced send failed" in r.message for r in caplog.records))
        client.token = BOT_TOKEN
        await reply.end()
        await backend.close()

    asyncio.run(stream())
    [message] = standin.in_thread(THREAD.thread_ts)
    assert message.text == "Hello world" and message.edits == 1
