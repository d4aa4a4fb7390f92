"""The client's address the limits count an anonymous caller by: X-Forwarded-For only from the proxies trusted."""

from __future__ import annotations

from starlette.types import Scope

from elicithub.server.addresses import ClientAddress


def scope(peer: str | None, *forwarded: str) -> Scope:
    return {
        "type": "http",
        "client": (peer, 50000) if peer is not None else None,
        "headers": [(b"x-forwarded-for", value.encode()) for value in forwarded],
    }


def test_without_trusted_proxies_the_address_is_the_connections() -> None:
    addresses = ClientAddress([])
    assert addresses.of(scope("203.0.113.9", "198.51.100.1")) == "203.0.113.9"
    assert addresses.of(scope(None, "198.51.100.1")) is None
    assert addresses.of(scope("testclient")) is None  # not an address: nothing to count by


def test_from_a_trusted_proxy_the_address_is_the_first_untrusted_from_the_right() -> None:
    addresses = ClientAddress(["10.0.0.0/8", "192.0.2.1"])
    assert addresses.of(scope("10.1.2.3", "198.51.100.1, 203.0.113.5, 192.0.2.1")) == "203.0.113.5"
    assert addresses.of(scope("10.1.2.3", "198.51.100.1", "203.0.113.5")) == "203.0.113.5"  # headers joined
    assert addresses.of(scope("10.1.2.3", "10.9.9.9, 192.0.2.1")) == "10.9.9.9"  # all proxies: the farthest
    assert addresses.of(scope("10.1.2.3")) == "10.1.2.3"  # the proxy said nothing
    assert addresses.of(scope("10.1.2.3", "203.0.113.5, not-an-address")) == "10.1.2.3"  # a hop it cannot read
    assert addresses.of(scope("203.0.113.9", "198.51.100.1")) == "203.0.113.9"  # not a proxy of ours


def test_ipv6_and_ipv4_seen_through_ipv6_are_counted_as_themselves() -> None:
    addresses = ClientAddress(["fd00::/8", "127.0.0.1"])
    assert addresses.of(scope("::ffff:127.0.0.1", "2001:db8::5")) == "2001:db8::5"
    assert addresses.of(scope("fd00::1", "::ffff:203.0.113.5")) == "203.0.113.5"
