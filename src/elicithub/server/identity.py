"""Who is asking: a bearer token (a configured user's, or a JWT from the OpenID provider), else the widget's signed
session cookie, else anonymous."""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from fastapi import HTTPException, Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from elicithub.auth.oidc import OidcVerifier
from elicithub.config import UserConfig
from elicithub.server.resource_metadata import ProtectedResource

SESSION_COOKIE = "elicithub_session"
SESSION_MAX_AGE_S = 30 * 24 * 3600
ANONYMOUS_COOKIE = "elicithub_anonymous"
"""An anonymous caller's own secret; the conversations the hub issues them are bound to it."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class Identity:
    """`user_for` answers at once, with the provider's keys as last fetched; `authenticate` may fetch them first.
    A protocol endpoint awaits `authenticate` at its door, so the SDK hooks behind it that can only call
    `user_for` find the keys in place."""

    def __init__(
        self,
        users: list[UserConfig],
        session_key: bytes,
        public_url: str,
        resource: ProtectedResource,
        oidc: OidcVerifier | None = None,
    ) -> None:
        self._users = {_digest(u.token): u.id for u in users}
        self._sessions = URLSafeTimedSerializer(session_key, salt="elicithub-session")
        self._public_host = urlsplit(public_url).netloc
        self.resource = resource
        self.oidc = oidc

    def user_for(self, token: str) -> str | None:
        return self._static_user(token) or (self.oidc.user(token) if self.oidc is not None else None)

    async def authenticate(self, token: str) -> str | None:
        """The user of a bearer token; raises `IdentityUnavailable` if it is a JWT and the keys cannot be had."""
        return self._static_user(token) or (await self.oidc.verify(token) if self.oidc is not None else None)

    def challenge(self, path: str = "", *, invalid_token: bool) -> str:
        return self.resource.challenge(path, invalid_token=invalid_token)

    def _static_user(self, token: str) -> str | None:
        # Looked up by digest: one lookup however many users, and its timing says nothing about how near a guess
        # came to a token (a guess steers its digest no nearer to a known one).
        return self._users.get(_digest(token))

    def session_token(self, user_id: str) -> str:
        """The signed value of the session cookie that makes a browser `user_id`."""
        return self._sessions.dumps(user_id)

    def start_session(self, response: Response, user_id: str, *, secure: bool) -> None:
        """Make the browser `user_id`: an HTTP-only cookie, so the page itself never holds a credential."""
        response.set_cookie(
            SESSION_COOKIE,
            self.session_token(user_id),
            max_age=SESSION_MAX_AGE_S,
            path="/",
            httponly=True,
            samesite="lax",
            secure=secure,
        )

    def end_session(self, response: Response) -> None:
        response.delete_cookie(SESSION_COOKIE, path="/")

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
        """The caller, with the provider's keys as last fetched (for pages that a browser opens)."""
        token = self._bearer(request)
        return self.session_user(request) if token is None else self._known(self.user_for(token))

    async def of(self, request: Request) -> str | None:
        """The caller of an API request; a JWT may fetch the provider's keys first."""
        token = self._bearer(request)
        return self.session_user(request) if token is None else self._known(await self.authenticate(token))

    def _bearer(self, request: Request) -> str | None:
        """The request's bearer token, None without an Authorization header; any other scheme is refused."""
        header = request.headers.get("authorization")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else ""

    def _known(self, user: str | None) -> str:
        if user is None:
            challenge = self.challenge(invalid_token=True)
            raise HTTPException(401, "The bearer token is not valid.", headers={"WWW-Authenticate": challenge})
        return user

    def anonymous_secret(self, request: Request) -> str | None:
        """The secret of an anonymous caller's cookie (not for a write another origin sends on their behalf)."""
        secret = request.cookies.get(ANONYMOUS_COOKIE, "")
        return secret if len(secret) >= 32 and not self._cross_origin_write(request) else None

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

    def bearer_groups(self, request: Request) -> frozenset[str] | None:
        """The groups a request's bearer JWT puts its user in (none for a static token), with the provider's keys as
        `of` left them; None when the request has no bearer token (a browser's session, or no one)."""
        token = self._bearer(request)
        if token is None:
            return None
        return self.oidc.groups(token) if self.oidc is not None and self._static_user(token) is None else frozenset()
