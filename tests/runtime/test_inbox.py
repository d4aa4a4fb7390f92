"""The inbox's feed over the in-process store: a reader that comes back after the log dropped what it missed starts
over, and an entry of a question that has ended meanwhile adds nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta

from elicithub.core.approval import Approval, People
from elicithub.core.elicitation import Answer, Elicitation, State, new_elicitation, utcnow
from elicithub.core.events import ElicitationRequested, ElicitationResolved
from elicithub.core.jsoncodec import JsonObject
from elicithub.runtime.inbox import (
    KEY,
    AddedEntry,
    AddedEvent,
    Inbox,
    Item,
    RemovedEntry,
    RemovedEvent,
    ResetEvent,
    item,
)
from elicithub.store.memory.elicitations import MemoryElicitations
from elicithub.store.memory.events import MemoryEvents
from tests.shapes import assert_shaped


def approval(requester: str = "alice") -> Elicitation:
    """An approval of `requester`'s call by carol, escalated to dave a day ago."""
    escalation = Approval(People(("carol",)), escalate_to=People(("dave",)), escalate_at=utcnow() - timedelta(1))
    return new_elicitation(
        conversation_id="conv",
        user_id=requester,
        run_id="run",
        mode="form",
        message="Approve?",
        timeout_s=600,
        requested_schema={"type": "object", "properties": {"approve": {"type": "boolean"}}},
        context={"trigger": "approval", "requester": requester},
        approval=escalation,
    )


async def next_event(events: AsyncIterator[tuple[int | None, JsonObject]]) -> tuple[int | None, JsonObject]:
    return await asyncio.wait_for(anext(events), 30)


def test_a_reader_whose_position_the_log_no_longer_keeps_starts_over() -> None:
    async def scenario() -> None:
        store, log = MemoryElicitations(), MemoryEvents(max_len=2)
        inbox = Inbox(log, store)
        asked = [approval() for _ in range(3)]
        for question in asked:
            await store.put(question)
            inbox.heard(question, ElicitationRequested(question))

        async def snapshot() -> list[Elicitation]:
            return asked[::-1]

        # The log keeps entries 2 and 3: position 1 is resumable (nothing is missing after it), 0 is not.
        kept = inbox.follow("carol", (), "1", snapshot)
        assert [(await next_event(kept))[1]["elicitationId"] for _ in range(2)] == [asked[1].id, asked[2].id]
        await kept.aclose()
        gone = inbox.follow("carol", (), "0", snapshot)
        position, reset = await next_event(gone)
        assert (position, reset) == (None, {"type": "inbox-reset"})
        shown = [await next_event(gone) for _ in range(3)]
        assert [e["elicitationId"] for _, e in shown] == [q.id for q in asked]  # oldest first: newest ends on top
        assert [p for p, _ in shown] == [None, None, 3]
        await gone.aclose()

    asyncio.run(scenario())


def test_an_escalation_heard_after_the_approval_ended_adds_nothing() -> None:
    async def scenario() -> None:
        store, log = MemoryElicitations(), MemoryEvents()
        inbox = Inbox(log, store)
        ended, still_open = approval(), approval()
        for question in (ended, still_open):
            await store.put(question)
        # The sweep read it open, then carol answered, and her answer went on the log before its escalation did.
        assert await store.transition(ended.id, State.ACCEPTED, Answer("accept", {"approve": True}, "carol"), utcnow())
        inbox.heard(ended, ElicitationResolved(ended.id, "accepted", "carol"))

        async def nothing() -> list[Elicitation]:
            return []

        dave = inbox.follow("dave", (), None, nothing)
        assert (await next_event(dave))[1] == {"type": "inbox-reset"}
        await inbox.escalated(ended, People(("dave",)))
        await inbox.escalated(still_open, People(("dave",)))
        # The escalation of the one that ended is passed over; the open one is his now.
        _, added = await next_event(dave)
        assert added["type"] == "inbox-added" and added["elicitationId"] == still_open.id
        await dave.aclose()

    asyncio.run(scenario())


def test_an_item_keeps_its_keys_in_order_and_has_those_of_its_shape() -> None:
    own = approval()
    sign_in = replace(own, mode="url", url="http://127.0.0.1:8700/auth/connect?t=x", requested_schema=None)
    assert list(item(own, "alice")) == [
        "elicitationId",
        "conversationId",
        "message",
        "mode",
        "requestedSchema",
        "context",
        "createdAt",
        "expiresAt",
    ]
    assert list(item(sign_in, "carol")) == [
        "elicitationId",
        "message",
        "mode",
        "url",
        "context",
        "createdAt",
        "expiresAt",
    ]
    for shown in (item(own, "alice"), item(own, "carol"), item(sign_in, "alice"), item(sign_in, "carol")):
        assert_shaped(shown, Item)


def test_every_event_of_the_feed_and_entry_of_the_log_has_the_keys_of_its_shape() -> None:
    async def scenario() -> None:
        store, log = MemoryElicitations(), MemoryEvents()
        inbox = Inbox(log, store)
        listed, asked, ended = approval(), approval(), approval()
        for question in (listed, asked, ended):
            await store.put(question)

        async def snapshot() -> list[Elicitation]:
            return [listed]

        carol = inbox.follow("carol", (), None, snapshot)
        events = [await next_event(carol) for _ in range(2)]  # inbox-reset, then the one listed
        inbox.heard(asked, ElicitationRequested(asked))
        events.append(await next_event(carol))
        inbox.heard(ended, ElicitationRequested(ended))
        events.append(await next_event(carol))
        await store.transition(ended.id, State.ACCEPTED, Answer("accept", {"approve": True}, "dave"), utcnow())
        inbox.heard(ended, ElicitationResolved(ended.id, "accepted", "dave"))
        inbox.heard(asked, ElicitationResolved(asked.id, "cancelled"))
        events += [await next_event(carol) for _ in range(2)]
        await carol.aclose()
        await inbox.escalated(listed, People(("dave",)))
        kinds = {"inbox-reset": ResetEvent, "inbox-added": AddedEvent, "inbox-removed": RemovedEvent}
        assert [e["type"] for _, e in events] == [*["inbox-reset"] + ["inbox-added"] * 3, *["inbox-removed"] * 2]
        assert [e.get("answeredBy") for _, e in events[-2:]] == ["dave", None]
        for _, event in events:
            assert_shaped(event, kinds[event["type"]])
        entries = [entry for _, entry in await log.read(KEY)]
        assert [e["kind"] for e in entries] == ["added", "added", "removed", "removed", "escalated"]
        for entry in entries:
            assert_shaped(entry, RemovedEntry if entry["kind"] == "removed" else AddedEntry)

    asyncio.run(scenario())
