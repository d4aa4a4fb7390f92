"""Where a demo server is reached: apart from the servers themselves, whose SDKs are slow to import."""

from __future__ import annotations


def base_url(host: str, port: int) -> str:
    """The http URL of a server listening on host:port (IPv6 literals get brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
