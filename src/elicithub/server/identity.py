"""Who is asking: a bearer token from the config, else the widget's signed session cookie, else anonymous."""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from itsdangerous import BadSignature, URLSafeTimedSerializer

from elicithub.config import UserConfig

SESSION_COOKIE = "elicithub_session"
SESSION_MAX_AGE_S = 30 * 24 * 3600


class Identity:
    def __init__(self, users: list[UserConfig], session_key: bytes, public_url: str) -> None:
        self._users = [(u.token.encode(), u.id) for u in users]
        self._sessions = URLSafeTimedSerializer(session_key, salt="elicithub-session")
        self._public_host = urlsplit(public_url).netloc

    def user_for(self, token: str) -> str | None:
        supplied = token.encode()
        found = None
        # Compare against every token in constant time so timing says nothing about which one nearly matched.
        for known, user_id in self._users:
            if hmac.compare_digest(known, supplied):
                found = user_id
        return found

    def session_token(self, user_id: str) -> str:
        """The signed value of the session cookie that makes a browser `user_id`."""
        return self._sessions.dumps(user_id)

    def session_user(self, request: Request) -> str | None:
        """The user of a valid session cookie; a missing, stale or forged one is simply no user."""
        token = request.cookies.get(SESSION_COOKIE)
        if not token or self._cross_origin_write(request):
            return None
        try:
            user = self._sessions.loads(token, max_age=SESSION_MAX_AGE_S)
        except BadSignature:
            return None
        return user if isinstance(user, str) and user else None

    def __call__(self, request: Request) -> str | None:
        header = request.headers.get("authorization")
        if header is None:
            return self.session_user(request)
        scheme, _, token = header.partition(" ")
        user = self.user_for(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise HTTPException(401, "The bearer token is not valid.", headers={"WWW-Authenticate": "Bearer"})
        return user

    def _cross_origin_write(self, request: Request) -> bool:
        # Cookies ride along on requests other sites make; a state-changing one from another origin must not act
        # as the user (SameSite=Lax does not separate two ports of one host, which count as the same site).
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return False
        origin = request.headers.get("origin")
        if origin is None:
            return False
        host = urlsplit(origin).netloc
        # The public URL counts too: a proxy in front of the hub may pass on its own Host header.
        return origin == "null" or host not in (request.headers.get("host"), self._public_host)
