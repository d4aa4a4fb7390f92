"""Who is asking: bearer tokens from the config resolve to users; no header means anonymous."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

from elicithub.config import UserConfig


class Identity:
    def __init__(self, users: list[UserConfig]) -> None:
        self._users = [(u.token.encode(), u.id) for u in users]

    def user_for(self, token: str) -> str | None:
        supplied = token.encode()
        found = None
        # Compare against every token in constant time so timing says nothing about which one nearly matched.
        for known, user_id in self._users:
            if hmac.compare_digest(known, supplied):
                found = user_id
        return found

    def __call__(self, request: Request) -> str | None:
        header = request.headers.get("authorization")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        user = self.user_for(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise HTTPException(401, "The bearer token is not valid.", headers={"WWW-Authenticate": "Bearer"})
        return user
