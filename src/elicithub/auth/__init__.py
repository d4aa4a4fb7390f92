"""Credentials: the hub's keys, the encrypted token vault, signed links and hosted OAuth pages."""
