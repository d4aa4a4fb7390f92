"""The ASGI app: routes, identity and error shapes."""
