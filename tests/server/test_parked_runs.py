"""Parked runs end to end: a 2026-07-28 round parks its run (no task while it waits), a 2025-11-25 question, held
open inside the downstream session, keeps its run waiting; readers see the same either way."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import RunningHub, eventually, sse_data
from tests.server.test_chat_ui_stream import answer_part, ask, text_of, ui_body


def parked(hub: RunningHub) -> int:
    return hub.hub.conversations.parked()


def continuation(hub: RunningHub, conversation: str, part: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's response when nobody follows the run: the continuation, streamed on it."""
    answer = answer_part(part["id"], "accept", {"region": "eu-west-1"})
    with hub.client() as client:
        eventually(lambda: client.get("/healthz").json()["openStreams"] == 0, "the hub never saw the reader leave")
        with client.stream("POST", "/run/api/chat", json=ui_body(conversation, answer)) as response:
            assert response.status_code == 200
            return list(sse_data(response))


def shape(parts: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """What a client renders, without the ids and server names that differ between the two runs."""
    return [(p["type"], p.get("delta") or p.get("data", {}).get("outcome")) for p in parts]


@pytest.mark.parametrize("closed", [True, False])
def test_a_parked_run_streams_as_a_waiting_one_does(hub: RunningHub, closed: bool) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    for server in ("legacy", "mrtr"):  # a 2025-11-25 question waits live; a 2026-07-28 round parks
        conversation = f"conv-parity-{server}-{closed}"
        stream, part = ask(hub, conversation, f"{server}.provision")
        eventually(lambda server=server: parked(hub) == (1 if server == "mrtr" else 0), "the run did not park")
        health = hub.client().get("/healthz").json()
        assert (health["runs"], health["pendingElicitations"]) == (1, 1)  # parked or not, one run, one question
        if closed:
            stream.close()
            seen[server] = continuation(hub, conversation, part)
        else:
            with hub.client() as client:
                answer = answer_part(part["id"], "accept", {"region": "eu-west-1"})
                response = client.post("/run/api/chat", json=ui_body(conversation, answer))
                assert [p["type"] for p in sse_data(response)] == ["start", "data-elicitation-resolved", "finish"]
            seen[server] = stream.rest()
            stream.close()
        assert text_of(seen[server]) == "Provisioned orders in eu-west-1."
        eventually(lambda: hub.client().get("/healthz").json()["runs"] == 0, "the run did not finish")
        assert parked(hub) == 0
    assert shape(seen["mrtr"]) == shape(seen["legacy"])
    assert [p["type"] for p in seen["mrtr"]].count("tool-input-available") == (1 if closed else 0)


def test_an_expired_round_resumes_its_parked_run_with_the_tool_error(make_hub: Any) -> None:
    hub = make_hub(elicitation={"timeout_s": 1})  # swept every 0.5 s
    stream, _ = ask(hub, "conv-parked-expiry")
    eventually(lambda: parked(hub) == 1, "the run did not park")
    rest = stream.rest()
    stream.close()
    assert [p["data"]["outcome"] for p in rest if p["type"] == "data-elicitation-resolved"] == ["expired"]
    assert "did not answer" in text_of(rest)
    assert parked(hub) == 0


def test_a_reader_of_a_parked_run_sees_no_second_start(hub: RunningHub) -> None:
    stream, part = ask(hub, "conv-parked-reattach")
    stream.close()
    eventually(lambda: parked(hub) == 1, "the run did not park")
    with hub.client() as client:
        with client.stream("GET", "/run/api/conversations/conv-parked-reattach/stream") as following:
            parts = sse_data(following)
            replayed = []
            for p in parts:
                replayed.append(p)
                if p["type"] == "data-elicitation-request":
                    break
            answer = answer_part(part["id"], "accept", {"region": "eu-west-1"})
            client.post("/run/api/chat", json=ui_body("conv-parked-reattach", answer)).read()
            replayed += list(parts)
    types = [p["type"] for p in replayed]
    assert types.count("start-step") == 2 and types.count("tool-input-available") == 1
    assert text_of(replayed) == "Provisioned orders in eu-west-1."
