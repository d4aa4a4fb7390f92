"""The demo's sign-in: a browser that opens one of the hub's pages (the chat, the inbox, the admin's) without a session
becomes the dev user, while the demo is on and no identity provider is configured (there people are themselves)."""

from __future__ import annotations

from fastapi import Request, Response

from elicithub.config import Config
from elicithub.server.identity import Identity


class DevSignIn:
    def __init__(self, config: Config, identity: Identity) -> None:
        demo = config.demo
        self.user = demo.dev_user if demo.enabled and config.auth.oidc is None else None
        """Who a browser becomes; None: no one (the demo is off, or people sign in at their identity provider)."""
        self.identity = identity
        self.secure = config.public_url.startswith("https://")

    async def __call__(self, request: Request, response: Response) -> None:
        """Sign the browser of `request` in as the dev user with `response`, unless it has a session already or the
        request sends a bearer token (a client, not a browser)."""
        if self.user is None or "authorization" in request.headers:
            return
        # Without an identity provider a session is the hub's own cookie: reading it asks no one.
        if await self.identity.session(request) is None:
            secure = self.secure or request.url.scheme == "https"
            self.identity.start_session(response, self.user, secure=secure)
