"""Reading a request's body ahead of the app: whole, within a limit, and handed on to the app behind; a middleware
that needs the body first gets it, or, when its client went away, is not called."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive, Scope, Send

from elicithub.surfaces import body_first, read_body, replaying


def messages(*sent: Message) -> tuple[Receive, list[Message]]:
    """A `receive` that gives `sent` in order, and the list of those not taken yet."""
    left = list(sent)

    async def receive() -> Message:
        return left.pop(0)

    return receive, left


def chunk(body: bytes, more: bool = True) -> Message:
    return {"type": "http.request", "body": body, "more_body": more}


DISCONNECT: Message = {"type": "http.disconnect"}


def test_a_body_in_chunks_is_read_whole() -> None:
    receive, left = messages(chunk(b'{"a": '), chunk(b""), chunk(b"1}", more=False), DISCONNECT)
    assert asyncio.run(read_body(receive)) == b'{"a": 1}'
    assert left == [DISCONNECT]


def test_a_body_with_no_more_body_key_is_one_message() -> None:
    receive, _ = messages({"type": "http.request", "body": b"x"})
    assert asyncio.run(read_body(receive)) == b"x"


def test_a_body_at_the_limit_is_read_and_one_past_it_is_none_with_the_rest_unread() -> None:
    receive, _ = messages(chunk(b"12"), chunk(b"34", more=False))
    assert asyncio.run(read_body(receive, max_bytes=4)) == b"1234"
    receive, left = messages(chunk(b"12"), chunk(b"345"), chunk(b"6", more=False))
    assert asyncio.run(read_body(receive, max_bytes=4)) is None
    assert left == [chunk(b"6", more=False)]


@pytest.mark.parametrize("max_bytes", [None, 100])
def test_a_client_gone_before_the_body_ends_is_client_disconnect(max_bytes: int | None) -> None:
    receive, _ = messages(chunk(b"12"), DISCONNECT)
    with pytest.raises(ClientDisconnect):
        asyncio.run(read_body(receive) if max_bytes is None else read_body(receive, max_bytes))


def test_the_app_behind_gets_the_body_read_ahead_then_what_comes_after() -> None:
    receive, _ = messages(chunk(b"a"), chunk(b"b", more=False), DISCONNECT)

    async def go() -> list[Message]:
        replayed = replaying(await read_body(receive), receive)
        return [await replayed(), await replayed()]

    assert asyncio.run(go()) == [chunk(b"ab", more=False), DISCONNECT]


def test_a_middleware_gets_the_body_first_and_the_app_behind_it_gets_it_again() -> None:
    receive, _ = messages(chunk(b"a"), chunk(b"b", more=False), DISCONNECT)
    seen: list[tuple[bytes, list[Message]]] = []

    async def middleware(body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        seen.append((body, [await receive(), await receive()]))

    asyncio.run(body_first(middleware, {"type": "http"}, receive, _never_sent))
    assert seen == [(b"ab", [chunk(b"ab", more=False), DISCONNECT])]


def test_a_middleware_whose_client_left_before_the_body_ended_is_not_called() -> None:
    receive, _ = messages(chunk(b"12"), DISCONNECT)
    called: list[bytes] = []

    async def middleware(body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        called.append(body)

    asyncio.run(body_first(middleware, {"type": "http"}, receive, _never_sent))  # nobody to answer: no error
    assert called == []


async def _never_sent(message: Message) -> None:
    raise AssertionError(f"nothing is sent: {message}")
