"""The client's address, as the limits count anonymous callers: the connection's peer, unless that is a proxy
`server.trusted_proxies` lists; then the address the proxies name in `X-Forwarded-For`."""

from __future__ import annotations

import ipaddress

from starlette.types import Scope

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class ClientAddress:
    def __init__(self, trusted_proxies: list[str]) -> None:
        self._trusted = [ipaddress.ip_network(proxy, strict=False) for proxy in trusted_proxies]

    def of(self, scope: Scope) -> str | None:
        """The client's address, None when the server does not say (a test client, a Unix socket).

        From a trusted peer, `X-Forwarded-For` is read from its right end (what the nearest proxy added) leftwards,
        past each trusted proxy, to the first address that is not one: what lies left of it the client itself may
        have written. A proxy that wrote something other than an address ends the walk at the last one known."""
        peer = scope.get("client")
        found = _address(peer[0]) if peer else None
        if found is None or not self._is_trusted(found):
            return None if found is None else str(found)
        forwarded = b",".join(value for name, value in scope["headers"] if name == b"x-forwarded-for")
        for hop in reversed(forwarded.decode("latin-1").split(",") if forwarded else []):
            address = _address(hop.strip())
            if address is None:
                break
            found = address
            if not self._is_trusted(address):
                break
        return str(found)

    def _is_trusted(self, address: Address) -> bool:
        return any(address in network for network in self._trusted)


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # An IPv4 client seen through an IPv6 socket is counted as itself.
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address
