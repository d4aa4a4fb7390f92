"""Pacing a growing text's sends: the first at once, more merged while the interval runs, one send at a time, and
a stop that leaves the rest to its owner with nothing under way. Driven by plain sends that record what they sent
(an interval no test waits out: 0, or an hour)."""

from __future__ import annotations

import asyncio

from elicithub.surfaces.pacing import Pacer

HOUR = 3600.0


class Sink:
    """A growing text and what was sent of it: each send sends the text so far."""

    def __init__(self, fail_first: bool = False) -> None:
        self.text = ""
        self.sent: list[str] = []
        self.fail_first = fail_first
        self.sending = asyncio.Event()
        self.go_on = asyncio.Event()
        self.go_on.set()
        self.under_way = 0
        self.most_under_way = 0

    async def send(self) -> None:
        text = self.text  # what a send sends is read when it starts
        self.under_way += 1
        self.most_under_way = max(self.most_under_way, self.under_way)
        self.sending.set()
        try:
            await self.go_on.wait()
            if self.fail_first:
                self.fail_first = False
                raise ConnectionError("Slack is unreachable")
            self.sent.append(text)
        finally:
            self.under_way -= 1


async def settled() -> None:
    """Let every task that can run, run."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_the_first_send_is_at_once_and_more_within_the_interval_waits_for_the_stop() -> None:
    async def go() -> list[str]:
        sink = Sink()
        pacer = Pacer(sink.send, HOUR)
        sink.text = "Hel"
        pacer.more()
        await settled()
        assert sink.sent == ["Hel"]
        for piece in "lo there":
            sink.text += piece
            pacer.more()
        await settled()
        assert sink.sent == ["Hel"]  # not due for an hour: nothing more was sent
        await pacer.stop()  # the waiting send is dropped; the owner sends the rest
        return sink.sent

    assert asyncio.run(go()) == ["Hel"]


def test_with_no_interval_each_send_takes_all_that_came_while_the_last_was_under_way() -> None:
    async def go() -> Sink:
        sink = Sink()
        pacer = Pacer(sink.send, 0)
        sink.go_on.clear()
        sink.text = "a"
        pacer.more()
        await sink.sending.wait()  # "a" is being sent
        for piece in "bcd":
            sink.text += piece
            pacer.more()
        sink.go_on.set()
        await settled()
        await pacer.stop()
        return sink

    sink = asyncio.run(go())
    assert sink.sent == ["a", "abcd"] and sink.most_under_way == 1


def test_a_stop_waits_for_a_send_under_way_and_none_starts_after_it() -> None:
    async def go() -> Sink:
        sink = Sink()
        pacer = Pacer(sink.send, 0)
        sink.go_on.clear()
        sink.text = "posted"
        pacer.more()
        await sink.sending.wait()
        sink.text += " and more"
        pacer.more()
        stopping = asyncio.create_task(pacer.stop())
        await settled()
        assert not stopping.done()  # a post cut short could be posted again: it is waited for
        sink.go_on.set()
        await stopping
        await settled()
        return sink

    sink = asyncio.run(go())
    assert sink.sent == ["posted"]  # what came after is the owner's to send


def test_a_failed_send_does_not_end_the_pacing() -> None:
    async def go() -> list[str]:
        sink = Sink(fail_first=True)
        pacer = Pacer(sink.send, 0)
        sink.text = "a"
        pacer.more()
        await settled()
        assert sink.sent == []
        sink.text += "b"
        pacer.more()
        await settled()
        await pacer.stop()
        return sink.sent

    assert asyncio.run(go()) == ["ab"]


def test_cancel_drops_a_waiting_send() -> None:
    async def go() -> list[str]:
        sink = Sink()
        pacer = Pacer(sink.send, HOUR)
        sink.text = "a"
        pacer.more()
        await settled()
        sink.text += "b"
        pacer.more()
        pacer.cancel()
        await settled()
        return sink.sent

    assert asyncio.run(go()) == ["a"]
