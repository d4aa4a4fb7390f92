"""Who is asking: a bearer token (a configured user's, or a JWT from the OpenID provider), else the widget's signed
session cookie (held as long as the provider's session, for a person signed in there), else anonymous."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fastapi import HTTPException, Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from elicithub.auth.sessions import ProviderSessions, Session
from elicithub.config import SESSION_S, UserConfig
from elicithub.server.resource_metadata import ProtectedResource

if TYPE_CHECKING:  # imported by a hub with a provider (joserfc, httpx)
    from elicithub.auth.oidc import OidcVerifier, Person

SESSION_COOKIE = "elicithub_session"
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
        provider_sessions: ProviderSessions | None = None,
        session_s: int = SESSION_S,
    ) -> None:
        """`provider_sessions`: those of people signed in at the identity provider; `session_s`: how long any
        session lasts at most."""
        self._users = {_digest(u.token): u.id for u in users}
        self._sessions = URLSafeTimedSerializer(session_key, salt="elicithub-session")
        self._public_host = urlsplit(public_url).netloc
        self.resource = resource
        self.oidc = oidc
        self.provider_sessions = provider_sessions
        self.session_s = session_s

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
        """The signed value of the session cookie that makes a browser `user_id` (the demo's dev user)."""
        return self._sessions.dumps(user_id)

    def start_session(self, response: Response, user_id: str, *, secure: bool) -> None:
        """Make the browser `user_id`: an HTTP-only cookie, so the page itself never holds a credential."""
        self._set_cookie(response, self.session_token(user_id), secure)

    async def start_provider_session(
        self, response: Response, person: Person, token: Mapping[str, Any], *, secure: bool
    ) -> None:
        """Make the browser the person the provider has just signed in, for as long as the provider's session lasts
        (the cookie names the session; the provider's tokens stay with the hub)."""
        assert self.provider_sessions is not None  # the hub has them whenever it has a provider to sign in with
        session_id = await self.provider_sessions.start(person, token)
        self._set_cookie(response, self._sessions.dumps({"session": session_id}), secure)

    def _set_cookie(self, response: Response, value: str, secure: bool) -> None:
        response.set_cookie(
            SESSION_COOKIE, value, max_age=self.session_s, path="/", httponly=True, samesite="lax", secure=secure
        )

    async def end_session(self, request: Request, response: Response) -> None:
        session_id = self._provider_session_id(self._cookie(request))
        if session_id is not None and self.provider_sessions is not None:
            await self.provider_sessions.end(session_id)
        response.delete_cookie(SESSION_COOKIE, path="/")

    async def session(self, request: Request) -> Session | None:
        """Who a valid session cookie signs in; a missing, stale or forged one, or one whose provider session ended,
        is no one. Raises `IdentityUnavailable` when the provider's session cannot be checked."""
        value = self._cookie(request)
        if isinstance(value, str) and value:
            return Session(value)
        session_id = self._provider_session_id(value)
        if session_id is None or self.provider_sessions is None:
            return None
        found = await self.provider_sessions.current(session_id)
        return None if found is None else Session(found.user_id, found.name)

    def _cookie(self, request: Request) -> Any:
        """What the request's session cookie says, if it is the hub's and not older than a session lasts."""
        token = request.cookies.get(SESSION_COOKIE)
        if not token or self._cross_origin_write(request):
            return None
        try:
            return self._sessions.loads(token, max_age=self.session_s)
        except BadSignature:
            return None

    @staticmethod
    def _provider_session_id(value: Any) -> str | None:
        session_id = value.get("session") if isinstance(value, dict) else None
        return session_id if isinstance(session_id, str) and session_id else None

    async def session_user(self, request: Request) -> str | None:
        session = await self.session(request)
        return None if session is None else session.user_id

    async def __call__(self, request: Request) -> str | None:
        """The caller, with the provider's keys as last fetched (for pages that a browser opens)."""
        token = self._bearer(request)
        return await self.session_user(request) if token is None else self._known(self.user_for(token))

    async def of(self, request: Request) -> str | None:
        """The caller of an API request; a JWT may fetch the provider's keys first."""
        token = self._bearer(request)
        return await self.session_user(request) if token is None else self._known(await self.authenticate(token))

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
