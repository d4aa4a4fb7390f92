"""The body limit on the protocol endpoints, whose gates read a POSTed body whole before the SDK's app sees it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import USERS, HubFactory


@pytest.mark.parametrize("path", ["/mcp", "/a2a"])
def test_bodies_over_the_limit_are_413_declared_or_streamed_and_a_small_one_goes_through(
    make_hub: HubFactory, path: str
) -> None:
    hub = make_hub(limits={"max_body_bytes": 1000})
    call = {"name": "assistant", "arguments": {"message": "x" * 2000}}
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}).encode()

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts what streams in
        for start in range(0, len(big), 256):
            yield big[start : start + 256]

    token = next(u["token"] for u in USERS if u["id"] == "alice")
    headers = {
        "authorization": f"Bearer {token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    with httpx.Client(base_url=hub.url, headers=headers, timeout=30) as client:
        for response in (client.post(path, content=big), client.post(path, content=chunks())):
            assert response.status_code == 413
            assert response.json()["error"]["code"] == "payload_too_large"
        small = client.post(path, content=b'{"jsonrpc": "2.0", "id": 2, "method": "no/such"}')
    assert small.status_code != 413 and small.json()["jsonrpc"] == "2.0"  # the protocol server's own answer
