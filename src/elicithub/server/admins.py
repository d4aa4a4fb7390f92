"""Who the hub's admins are: the users `admins:` names, and with OIDC anyone the provider puts in
`auth.oidc.admin_group` (a bearer JWT's groups claim; for a signed-in browser, its person's latest sign-in's)."""

from __future__ import annotations

from collections.abc import Collection

from fastapi import HTTPException, Request

from elicithub.auth.groups import SignedInGroups
from elicithub.server.identity import Identity


class Admins:
    def __init__(
        self, user_ids: Collection[str], admin_group: str | None, identity: Identity, signed_in: SignedInGroups
    ) -> None:
        self.user_ids = frozenset(user_ids)
        self.admin_group = admin_group
        self.identity = identity
        self.signed_in = signed_in

    async def admin(self, request: Request) -> str:
        """The admin who makes the request: 401 when no one is signed in, 403 for anyone who is not an admin."""
        user = await self.identity.of(request)
        if user is None:
            challenge = self.identity.challenge(invalid_token=False)
            raise HTTPException(401, "Sign in as an admin of this hub.", headers={"WWW-Authenticate": challenge})
        if user in self.user_ids or await self._in_admin_group(request, user):
            return user
        raise HTTPException(403, f"{user} is not an admin of this hub.")

    async def _in_admin_group(self, request: Request, user: str) -> bool:
        if self.admin_group is None:
            return False
        groups = self.identity.bearer_groups(request)
        if groups is None:  # no token: `user` is the browser session's
            groups = await self.signed_in.of(user)
        return self.admin_group in groups
