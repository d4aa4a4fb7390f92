"""How many Redis round trips one question round trip costs a hub (issue 25): counted, never timed."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio.connection

from tests.conftest import HubFactory
from tests.server.test_scale_out import chat_body, items

ROUND_TRIPS = 31
"""Steady state, one hub: 14 scripts (10 event appends, 2 conversation writes, the answer's compare-and-set, the
stream reader's lease on the conversation's log), 5 conversation reads, 4 run saves and 1 run read, 1 question
write, 2 question reads (the waiter's check after it registered, the answer's lookup), 2 log-length reads, 1 log
read: 30 counted, one more when the store's notice of the answer comes before the compare-and-set's reply (the
waiter then reads the question). Before issue 25 it was 41 (each waiting reader's blocking `XREAD` per event, a
read before each compare-and-set, the waiter's and the answer's second reads of the question, re-reads of an
ended one)."""


class Sent:
    """The requests the redis-py connections of this process write; one write is one round trip (a pipeline or a
    script call is one)."""

    def __init__(self) -> None:
        self.requests: list[str] = []


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    record = Sent()
    original = redis.asyncio.connection.AbstractConnection.send_packed_command

    async def counted(self: Any, command: Any, check_health: bool = True) -> None:
        record.requests.append(_first_command(command))
        await original(self, command, check_health)

    monkeypatch.setattr(redis.asyncio.connection.AbstractConnection, "send_packed_command", counted)
    return record


def _first_command(packed: Any) -> str:
    data = b"".join(bytes(chunk) for chunk in (packed if isinstance(packed, list) else [packed]))
    fields = data.split(b"\r\n")
    return fields[2].decode(errors="replace").upper() if len(fields) > 2 else "?"


def test_a_question_round_trip_costs_a_bounded_number_of_redis_round_trips(
    make_hub: HubFactory, redis_url: str, sent: Sent
) -> None:
    hub = make_hub(store={"url": redis_url, "heartbeat_s": 60})
    body = chat_body('/call mrtr.provision {"name": "orders"}')
    counts = []
    for _ in range(4):  # the first round also loads the scripts and opens connections
        sent.requests.clear()
        with hub.client() as client, client.stream("POST", "/run/v1/chat/completions", json=body) as response:
            conversation = response.headers["x-conversation-id"]
            stream = items(response)
            request = next(stream)
            assert isinstance(request, dict)
            answered = hub.answer("alice", conversation, request["elicitationId"], "accept", {"region": "eu-west-1"})
            assert answered.status_code == 200
            rest = list(stream)
        assert rest[-1] == "Provisioned orders in eu-west-1."
        counts.append(len(sent.requests))
    # The hub's background work (its heartbeat, the sweep for other instances' runs) may fall into a round.
    assert min(counts[1:]) <= ROUND_TRIPS, (counts, sent.requests)
    assert "XREAD" not in sent.requests  # readers here wait on the hub's one subscription, not a read each
